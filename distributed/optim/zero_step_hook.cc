// ZeRO stage 1 overlapped with DDP's backward: Note [ZeRO step in the comm hook].
#include "distributed/optim/zero_step_hook.h"

#include <memory>
#include <utility>
#include <vector>

#include "distributed/hooks/default_hooks.h"
#include "distributed/optim/parameter_allgather.h"
#include "distributed/utils.h"
#include "tensor/autograd_interface.h"
#include "tensor/factories.h"

namespace ember::distributed {

namespace {
// One owner's parameters of a bucket, and what carries them: the parameters themselves (in place)
// or one flat copy of them.
struct OwnerBroadcast {
  int owner;
  std::vector<Tensor> params;
  Tensor flat;  // defined only when coalesced
};

// The bucket's parameters grouped by owner, in rank order, so every rank issues the same
// broadcasts in the same order.
std::vector<OwnerBroadcast> group_by_owner(const ZeroRedundancyOptimizer& zero, const std::vector<Tensor>& params) {
  std::vector<OwnerBroadcast> out;
  for (int r = 0; r < zero.process_group().size(); ++r) {
    OwnerBroadcast b{r, {}, Tensor()};
    for (const Tensor& p : params) {
      if (zero.owner_of(p) == r) b.params.push_back(p);
    }
    if (!b.params.empty()) out.push_back(std::move(b));
  }
  return out;
}

// A future already completed with the bucket's result.
FuturePtr completed(const Tensor& result) {
  FuturePtr done = std::make_shared<Future>(std::vector<Device>{result.device()});
  done->mark_completed({result});
  return done;
}

// Starts the bucket's broadcasts (each owner sends its freshly stepped parameters) and returns a
// future that completes once every parameter holds its owner's values. As ZeRO's own
// broadcast_parameters: in place, one collective per parameter, when broadcast_bucket_bytes is 0
// (no copies); otherwise one flat copy per owner (the DDP bucket bounds its size).
FuturePtr broadcast_owned(ProcessGroup& group, std::shared_ptr<std::vector<OwnerBroadcast>> plan,
                          const Tensor& result, bool coalesce) {
  NoGradGuard no_grad;
  std::vector<FuturePtr> futures;
  auto launch = [&](Tensor t, int owner) {
    std::vector<Tensor> one{std::move(t)};
    futures.push_back(group.broadcast(one, BroadcastOptions{owner})->get_future());
  };
  for (auto& b : *plan) {
    if (!coalesce) {
      for (const Tensor& p : b.params) {
        EMBER_CHECK(p.is_contiguous(), "ZeroStepCommHook (rank ", group.rank(), "): parameter ", p.describe(),
                    " is not contiguous; set broadcast_bucket_bytes to broadcast it through a copy");
        launch(p, b.owner);
      }
      continue;
    }
    const int64_t n = check_same_dtype_device(b.params, "ZeroStepCommHook");
    b.flat = group.rank() == b.owner ? flatten_dense_tensors(b.params)
                                     : empty({n}, TensorOptions(b.params[0].dtype(), b.params[0].device()));
    launch(b.flat, b.owner);
  }
  // Chained, so that the bucket's future completes after every one and carries any one's error.
  FuturePtr all = completed(result);
  for (auto& f : futures) {
    all = all->then_future([f](Future&) { return f; });
  }
  const int rank = group.rank();
  return all->then([plan, result, rank](Future&) {
    NoGradGuard guard;
    for (const auto& b : *plan) {
      if (b.flat.defined() && b.owner != rank) copy_from_flat(b.flat, b.params);
    }
    return std::vector<Tensor>{result};
  });
}
// The bucket's parameters by one allgather of every rank's freshly stepped share (Note [ZeRO
// parameters by allgather]); the future completes once the other ranks' shares are copied in.
FuturePtr allgather_owned(const ZeroRedundancyOptimizer& zero, ProcessGroup& group, const std::vector<Tensor>& params,
                          const Tensor& result) {
  auto exchange = std::make_shared<ParameterAllgather>(
      params, [&zero](const Tensor& p) { return zero.owner_of(p); }, group);
  WorkPtr work = exchange->start(group);
  if (!work) return completed(result);
  return work->get_future()->then([exchange, result](Future&) {
    exchange->finish();
    return std::vector<Tensor>{result};
  });
}
}  // namespace

ZeroStepCommHook::ZeroStepCommHook(ZeroRedundancyOptimizer& zero) : zero_(zero) {
  ProcessGroup& group = zero_.process_group();
  EMBER_CHECK(zero_.options().overlap_with_ddp, "ZeroStepCommHook (rank ", group.rank(),
              "): the ZeroRedundancyOptimizer was built without overlap_with_ddp; set it, or register no hook");
  std::vector<int> everyone(group.size());
  for (int r = 0; r < group.size(); ++r) everyone[r] = r;
  ProcessGroup::Options options;
  options.group_name = "zero_broadcasts";
  broadcast_group_ = group.new_subgroup(everyone, options);
  EMBER_CHECK(broadcast_group_ != nullptr, "ZeroStepCommHook (rank ", group.rank(),
              "): could not make the broadcasts' communicator");
}

FuturePtr ZeroStepCommHook::run_hook(GradBucket& bucket) {
  EMBER_CHECK(!bucket.buffer().is_sparse(), "ZeroStepCommHook (rank ", zero_.process_group().rank(),
              "): bucket ", bucket.index(), " holds sparse gradients, which ZeRO does not shard");
  FuturePtr reduced = allreduce_hook(zero_.process_group(), bucket);
  ProcessGroupPtr broadcasts = broadcast_group_;
  ZeroRedundancyOptimizer* zero = &zero_;
  GradBucket copy = bucket;  // the Reducer's GradBucket lives only for this call
  size_t known = 0;  // parameters of ZeRO in this bucket, whoever owns them
  for (const Tensor& p : bucket.parameters()) known += zero_.owner_of(p) >= 0 ? 1 : 0;
  const bool coalesce = zero_.options().broadcast_bucket_bytes > 0;
  const bool allgather = zero_.options().parameter_exchange == ParameterExchange::kAllgather;
  // The broadcasts' plan (the allgather makes its own).
  auto plan = allgather ? nullptr
                        : std::make_shared<std::vector<OwnerBroadcast>>(group_by_owner(zero_, bucket.parameters()));
  return reduced->then_future([zero, copy, plan, known, broadcasts, coalesce, allgather](Future& f) mutable {
    const Tensor result = f.value().at(0);
    copy.set_buffer(result);
    zero->step_owned(copy.parameters(), copy.gradients());
    zero->mark_stepped_by_hook(known);
    if (allgather) return allgather_owned(*zero, *broadcasts, copy.parameters(), result);
    return broadcast_owned(*broadcasts, plan, result, coalesce);
  });
}

}  // namespace ember::distributed
