// ZeRO stage 1 (docs/design.md, distributed/optim/): PyTorch's torch.distributed.optim.
// ZeroRedundancyOptimizer. The parameters are partitioned across the ranks
// (parameter_partition.h); each rank builds the wrapped optimizer over its own shard only, so it
// keeps about 1/world of the optimizer state, steps that shard, and then every rank broadcasts the
// parameters it updated. The result is the unsharded optimizer's, bit for bit, because each
// parameter's update is the same arithmetic on the same (allreduced) gradient, done once.
//
// Note [ZeRO state_dict layout]
// consolidate_state_dict(to) gathers every rank's shard of the state on rank `to`, renumbered with
// the global parameter indices, so the consolidated state_dict() is exactly the unsharded
// optimizer's (Note [Optimizer state_dict layout] in optim/optimizer.h). load_state_dict takes that
// layout on every rank and keeps the state of its own shard: a checkpoint is independent of the
// world size it was written at (saved at 2 ranks, resumed at 3), and can also be loaded by an
// unsharded optimizer.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/optim/parameter_exchange.h"
#include "distributed/optim/parameter_partition.h"
#include "distributed/process_group.h"
#include "optim/optimizer.h"

namespace ember::distributed {

// Builds the wrapped optimizer over some parameter groups (each with its options), e.g.
//   [](std::vector<optim::OptimizerParamGroup> g) {
//     return std::make_unique<optim::AdamW>(std::move(g), optim::AdamWOptions(1e-3)); }
using OptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::OptimizerParamGroup>)>;

struct ZeroRedundancyOptimizerOptions {
  // PyTorch's overlap_with_ddp: the step of each DDP bucket's own parameters and their broadcast
  // run in the comm hook (ZeroStepCommHook, zero_step_hook.h) as soon as the bucket's allreduce
  // completes; step() then only checks that the hook stepped everything. Until the hook has run
  // a whole backward (no hook registered yet), step() does the plain sharded step.
  bool overlap_with_ddp = false;
  // How the updated parameters travel: 0, one in-place broadcast per parameter (no copy, so no
  // transient memory: PyTorch's default); > 0, flattened into buckets of at most this many bytes
  // (broadcast_coalesced: fewer collectives, one bucket's copy at a time). Also the bucket size
  // of consolidate_state_dict's transfers (64 MiB when 0).
  int64_t broadcast_bucket_bytes = 0;
  // kAllgather: the parameters travel as one allgather per bucket of broadcast_bucket_bytes
  // (25 MiB when 0; under overlap_with_ddp, within each DDP bucket), through padded flat copies
  // (parameter_allgather.h): over a link, both directions carry parameters at once.
  ParameterExchangeMode parameter_exchange = ParameterExchangeMode::kBroadcast;
};

// See the top of this file. It is an optim::Optimizer, so zero_grad, param_groups (lr schedulers
// read and write the full groups' options; step() hands them to the local optimizer) and the
// state_dict layout are the usual ones.
class ZeroRedundancyOptimizer : public optim::Optimizer {
 public:
  ZeroRedundancyOptimizer(std::vector<Tensor> params, const OptimizerFactory& factory,
                          ProcessGroupPtr group, ZeroRedundancyOptimizerOptions options = {});
  ZeroRedundancyOptimizer(std::vector<optim::OptimizerParamGroup> groups, const OptimizerFactory& factory,
                          ProcessGroupPtr group, ZeroRedundancyOptimizerOptions options = {});

  // Steps this rank's shard, then sends each rank's updated parameters to all (a broadcast from
  // each owner, or an allgather: options().parameter_exchange). Under
  // overlap_with_ddp, once the hook is stepping, it only checks that every bucket was stepped.
  void step() override;
  const char* name() const override { return "ZeroRedundancyOptimizer"; }

  // Collective (every rank must call it): gathers the whole state on rank `to`. Only there does
  // state_dict() answer afterwards (PyTorch's rule), with the state as of this call.
  void consolidate_state_dict(int to = 0);
  // The consolidated state; throws on a rank that did not receive it.
  nn::StateDict state_dict() const override;
  // The unsharded layout (Note [ZeRO state_dict layout]); every rank loads it and keeps its shard.
  void load_state_dict(const nn::StateDict& sd) override;

  const ParameterPartition& partition() const { return partition_; }
  // The optimizer over this rank's shard (its groups mirror ours, empty where we own none).
  optim::Optimizer& local_optimizer() { return *local_; }
  const optim::Optimizer& local_optimizer() const { return *local_; }
  // Bytes of this rank's optimizer state tensors (the 1/world the sharding is for).
  int64_t local_state_bytes() const;
  ProcessGroup& process_group() const { return *group_; }
  const ZeroRedundancyOptimizerOptions& options() const { return options_; }

  // For ZeroStepCommHook: steps the parameters of `params` this rank owns with the matching
  // `grads`, after copying the full groups' options to the local optimizer.
  void step_owned(const std::vector<Tensor>& params, const std::vector<Tensor>& grads);
  // The rank that owns `param`, or -1 if it is none of ours.
  int owner_of(const Tensor& param) const;
  // The exchange of the updated parameters over `group` (the same ranks as this optimizer's), as
  // the options ask: step() uses one over process_group(), the hook one over its own communicator.
  ParameterExchange make_parameter_exchange(ProcessGroupPtr group, const char* caller) const;
  // For the hook: every parameter was stepped in this backward, so step() has nothing left to do.
  void mark_stepped_by_hook(size_t count);
  // Iterations whose step the hook did (overlap_with_ddp), for tests and reports.
  int64_t steps_taken_by_hook() const { return steps_taken_by_hook_; }

 protected:
  // The local optimizer validated the options when it was built from them.
  void validate_options(const optim::OptimizerOptions&) const override {}
  bool is_state_buffer(const std::string&) const override { return false; }

 private:
  ZeroRedundancyOptimizer(std::unique_ptr<optim::Optimizer> probe, const OptimizerFactory& factory,
                          ProcessGroupPtr group, ZeroRedundancyOptimizerOptions options);
  // Copies the full groups' options (lr, possibly set by a scheduler) into the local optimizer.
  void sync_local_options();
  int64_t consolidate_bucket_bytes() const {
    return options_.broadcast_bucket_bytes > 0 ? options_.broadcast_bucket_bytes : 64LL * 1024 * 1024;
  }

  ProcessGroupPtr group_;
  ZeroRedundancyOptimizerOptions options_;
  ParameterPartition partition_;
  std::unique_ptr<optim::Optimizer> local_;
  std::unordered_map<const TensorImpl*, int> owner_by_impl_;
  std::optional<ParameterExchange> exchange_;  // over group_
  // Parameters the hook stepped since the last step() (overlap_with_ddp).
  std::atomic<size_t> stepped_by_hook_{0};
  int64_t steps_taken_by_hook_ = 0;
  std::optional<nn::StateDict> consolidated_;
};

}  // namespace ember::distributed
