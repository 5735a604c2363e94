// ZeRO stage 1 overlapped with DDP's backward: Note [ZeRO step in the comm hook].
#include "distributed/optim/zero_step_hook.h"

#include <memory>
#include <utility>
#include <vector>

#include "distributed/hooks/default_hooks.h"

namespace ember::distributed {

ZeroStepCommHook::ZeroStepCommHook(ZeroRedundancyOptimizer& zero) : zero_(zero) {
  ProcessGroup& group = zero_.process_group();
  EMBER_CHECK(zero_.options().overlap_with_ddp, "ZeroStepCommHook (rank ", group.rank(),
              "): the ZeroRedundancyOptimizer was built without overlap_with_ddp; set it, or register no hook");
  std::vector<int> everyone(group.size());
  for (int r = 0; r < group.size(); ++r) everyone[r] = r;
  ProcessGroup::Options options;
  options.group_name = "zero_broadcasts";
  ProcessGroupPtr own_group = group.new_subgroup(everyone, options);
  EMBER_CHECK(own_group != nullptr, "ZeroStepCommHook (rank ", group.rank(),
              "): could not make the broadcasts' communicator");
  exchange_ = std::make_shared<ParameterExchange>(zero_.make_parameter_exchange(own_group, "ZeroStepCommHook"));
}

FuturePtr ZeroStepCommHook::run_hook(GradBucket& bucket) {
  EMBER_CHECK(!bucket.buffer().is_sparse(), "ZeroStepCommHook (rank ", zero_.process_group().rank(),
              "): bucket ", bucket.index(), " holds sparse gradients, which ZeRO does not shard");
  FuturePtr reduced = allreduce_hook(zero_.process_group(), bucket);
  ZeroRedundancyOptimizer* zero = &zero_;
  std::shared_ptr<const ParameterExchange> exchange = exchange_;
  GradBucket copy = bucket;  // the Reducer's GradBucket lives only for this call
  size_t known = 0;  // parameters of ZeRO in this bucket, whoever owns them
  for (const Tensor& p : bucket.parameters()) known += zero_.owner_of(p) >= 0 ? 1 : 0;
  return reduced->then_future([zero, exchange, copy, known](Future& f) mutable {
    const Tensor result = f.value().at(0);
    copy.set_buffer(result);
    zero->step_owned(copy.parameters(), copy.gradients());
    zero->mark_stepped_by_hook(known);
    return exchange->exchange_async(copy.parameters(), result);
  });
}

}  // namespace ember::distributed
