// The DETAIL consistency check as a group in front of a backend's group (PyTorch's
// ProcessGroupWrapper): before each collective, every rank's fingerprint of it is compared.
#pragma once

#include <atomic>
#include <functional>

#include "distributed/diagnostics/debug.h"
#include "distributed/process_group.h"

namespace ember::distributed {

// Note [DETAIL fingerprints]
// At EMBER_DISTRIBUTED_DEBUG=DETAIL, init_process_group and new_subgroup hand out this wrapper
// instead of the backend's group (with_debug_wrapper). Each collective called on it first
// allgathers a fixed-size fingerprint -- kind, dtype, shape, reduce op, root -- on the wrapped
// group, and compares every rank's with this rank's (check_fingerprints): on a mismatch every
// rank's collective fails, before any payload moved, with an error listing what each rank called
// (from its Work, as any collective's error); the group stays usable. Otherwise the collective
// goes to the wrapped group as soon as the exchange completes: from a callback on the MPI worker,
// which runs it at once, when the exchange was queued; on the caller's thread when it already ran
// or is queued on a stream (NCCL). Either way nothing starts between a collective and its
// exchange. On the MPI backend the caller does not block; on NCCL it waits for the small exchange
// to reach the host, as PyTorch's wrapper waits for its gloo one.
// The exchange goes through the wrapped group, not a helper group as PyTorch's gloo one, because
// that is where the order of the collectives is fixed: a comm hook's later rounds are issued from
// callbacks on the MPI worker and start at once (Note [Collectives issued from callbacks run
// inline]), so their calls interleave with the autograd thread's differently on every rank while
// their starts do not. The exchange is a collective of its own, with its own sequence number (the
// collective it checks has the next one, which the report names), and each collective waits for
// its exchange: DETAIL finds a desync, it does not train fast.
class ProcessGroupWrapper : public ProcessGroup {
 public:
  explicit ProcessGroupWrapper(ProcessGroupPtr wrapped);

  const ProcessGroupPtr& wrapped() const { return wrapped_; }
  std::string backend_name() const override { return wrapped_->backend_name(); }
  Device collective_device() const override { return wrapped_->collective_device(); }
  // The collectives' payload, without the fingerprint exchanges'.
  uint64_t payload_bytes() const override {
    return wrapped_->payload_bytes() - exchanged_bytes_.load(std::memory_order_relaxed);
  }

 protected:
  WorkPtr run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) override;
  WorkPtr run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) override;
  WorkPtr run_allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts) override;
  WorkPtr run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) override;
  WorkPtr run_allgather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                        const AllgatherOptions& opts) override;
  WorkPtr run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) override;
  WorkPtr run_allgather_coalesced(std::vector<std::vector<Tensor>>& output_lists, std::vector<Tensor>& input_list,
                                  const AllgatherOptions& opts) override;
  WorkPtr run_gather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                     const GatherOptions& opts) override;
  WorkPtr run_scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                      const ScatterOptions& opts) override;
  WorkPtr run_reduce_scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                             const ReduceScatterOptions& opts) override;
  WorkPtr run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) override;
  WorkPtr run_alltoall_base(Tensor& output, Tensor& input, const std::vector<int64_t>& output_split_sizes,
                            const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) override;
  WorkPtr run_alltoall(std::vector<Tensor>& output_tensors, std::vector<Tensor>& input_tensors,
                       const AllToAllOptions& opts) override;
  WorkPtr run_barrier(const BarrierOptions& opts) override;
  // Point-to-point calls pair two ranks, not the group: they pass unchecked, as in PyTorch.
  WorkPtr run_send(std::vector<Tensor>& tensors, int dst_rank, int tag) override;
  WorkPtr run_recv(std::vector<Tensor>& tensors, int src_rank, int tag) override;
  ProcessGroupPtr run_new_subgroup(const std::vector<int>& ranks, Options options) override;

  void check_backend_tensor(const Tensor& t, const char* op) const override;
  std::string class_name() const override { return wrapped_->class_name(); }

 private:
  // Exchanges this rank's fingerprint of the collective with every rank's, then runs it; when they
  // differ, returns a failed Work naming what each rank called instead (Note [DETAIL fingerprints]).
  WorkPtr checked(const CollectiveFingerprint& mine, std::function<WorkPtr()> run);

  const ProcessGroupPtr wrapped_;
  std::atomic<uint64_t> exchanged_bytes_{0};  // what the fingerprint exchanges handed to wrapped_
};

// `group` behind a ProcessGroupWrapper when its debug level is DETAIL and it is not one already;
// `group` itself otherwise (nullptr stays nullptr).
ProcessGroupPtr with_debug_wrapper(ProcessGroupPtr group);

}  // namespace ember::distributed
