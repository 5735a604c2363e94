// docs/design.md steps 6, 10, 12 and 13 under Join (distributed/join.h): DistributedDataParallel as a
// Joinable. A rank still training adds Join's collectives to its forward (pre_forward); a joined
// rank's DDPJoinHook issues, per iteration of the others, the same collectives in the same order
// (Note [Join protocol]): bucket rebuild, buffer broadcast from the highest rank still training,
// the "backward synchronises" allreduce, then zeros for every bucket, and its last used-parameter
// map (reducer_join.cc).
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/sync_batch_norm.h"
#include "distributed/diagnostics/trace.h"
#include "tensor/factories.h"

namespace ember::distributed {

// PyTorch's _DDPJoinHook.
class DDPJoinHook final : public JoinHook {
 public:
  DDPJoinHook(DistributedDataParallel& ddp, const JoinOptions& options) : ddp_(ddp) {
    ddp_.divide_by_initial_world_size_ = options.divide_by_initial_world_size;
    ddp_.join_uneven_inputs_ = true;
  }

  // One iteration of the ranks still training, shadowed (their pre_forward, then their backward).
  void main_hook() override {
    DistributedDataParallel& ddp = ddp_;
    TraceScope scope("Join: shadow iteration", "ddp");
    ddp.reducer_->rebuild_buckets();  // a broadcast, once, in the iteration the others rebuild
    if (ddp.will_sync_module_buffers()) ddp.broadcast_buffers_from(ddp.find_common_rank(false));
    WorkPtr work = ddp.check_global_requires_backward_grad_sync(true);
    work->wait();
    const bool should_sync_backwards = work->result().at(0).item<double>() != 0;
    // The others' next forward broadcasts buffers only if this iteration synchronised.
    ddp.require_forward_param_sync_ = should_sync_backwards;
    if (!should_sync_backwards) return;
    ddp.reducer_->match_all_reduce_for_bwd_pass();
    ddp.reducer_->push_all_rebuilt_params();
  }

  void post_hook(bool is_last_joiner) override { ddp_.sync_final_model(is_last_joiner); }

 private:
  DistributedDataParallel& ddp_;
};

std::unique_ptr<JoinHook> DistributedDataParallel::join_hook(const JoinOptions& options) {
  // PyTorch's DDP.join docstring: with collectives such as SyncBatchNorm's in forward,
  // throw_on_early_termination must be enabled (PyTorch hangs otherwise; ember refuses). Layers on
  // a group of their own can be shadowed by a SyncBatchNormJoinable instead.
  if (options.enable && !options.throw_on_early_termination) {
    for (auto& [name, m] : module_->named_modules()) {
      auto* bn = dynamic_cast<nn::SyncBatchNorm*>(m.get());
      DDP_CHECK(bn == nullptr || bn->process_group() != process_group_, "Join: SyncBatchNorm layer '", name,
                "' communicates over this DDP's process group, whose collectives a joined rank cannot "
                "shadow (it would pair them with DDP's). Convert the model with a group of its own "
                "(convert_sync_batchnorm(model, new_group(ranks))) and pass a SyncBatchNormJoinable to "
                "the Join, or set throw_on_early_termination=true in JoinOptions");
    }
  }
  return std::make_unique<DDPJoinHook>(*this, options);
}

void DistributedDataParallel::notify_join_context() {
  WorkPtr work = Join::notify_join_context(*this);
  if (work) reducer_->set_forward_pass_work_handle(std::move(work), divide_by_initial_world_size_);
}

int DistributedDataParallel::find_common_rank(bool condition) {
  Tensor t = full({1}, Scalar(condition ? process_group_->rank() : -1), kInt64)
                 .to(process_group_->collective_device());
  std::vector<Tensor> list{t};
  AllreduceOptions max;
  max.reduce_op = ReduceOp::kMax;
  process_group_->allreduce(list, max)->wait();
  const int rank = static_cast<int>(t.item<int64_t>());
  DDP_CHECK(rank >= 0, "Join: expected the condition to hold on at least one rank (internal error)");
  return rank;
}

WorkPtr DistributedDataParallel::check_global_requires_backward_grad_sync(bool is_joined_rank) {
  const bool sync = !is_joined_rank && require_backward_grad_sync_ && GradMode::is_enabled();
  std::vector<Tensor> list{full({1}, Scalar(sync ? 1.0 : 0.0), kFloat64).to(process_group_->collective_device())};
  return process_group_->allreduce(list);
}

void DistributedDataParallel::sync_final_model(bool is_last_joiner) {
  authoritative_rank_ = find_common_rank(is_last_joiner);
  sync_module_states(authoritative_rank_);
}

}  // namespace ember::distributed
