// ZeRO stage 1 overlapped with DDP's backward (docs/design.md step 10, distributed/optim/): PyTorch's
// ddp_zero_hook.hook_with_zero_step(allreduce_hook, ddp, zero) as a comm hook class. As each
// bucket's allreduce completes, the rank steps the parameters of that bucket it owns and every
// rank broadcasts the bucket's updated parameters from their owners (or allgathers them:
// ParameterExchangeMode::kAllgather), so the step and the exchange hide behind the rest of backward.
//
// Note [ZeRO step in the comm hook]
// - The hook steps with the bucket's reduced gradients (the bucket buffer, divided by the world
//   size before the sum as allreduce_hook does, so the bits are DDP's default path's), before the
//   Reducer has written them back to .grad; .grad still gets them in finalize_backward.
// - The step runs in the allreduce's callback, on the process group's worker, right after the
//   bucket's allreduce. The broadcasts (or the allgather) go to a second communicator over the
//   same ranks (made when the hook is built), with its own worker, so bucket b's parameters
//   travel while bucket b+1 is allreduced. Each communicator keeps one order on every rank: the allreduces in bucket
//   order (the autograd thread's), the broadcasts in bucket order (issued from the callbacks,
//   which run in bucket order, or, when the allreduce had already completed, from the autograd
//   thread before its next bucket).
// - A bucket's parameters are updated while backward goes on: DDP launches bucket b only once
//   every gradient in it is ready, and nothing later in backward reads those parameters (a
//   parameter reused by an earlier layer is also in no bucket before its last gradient).
// - The bucket's future completes after the broadcasts are copied back, and finalize_backward
//   waits for every bucket, so the next forward sees the updated parameters.
// - PyTorch needs two warm-up iterations because it assigns whole DDP buckets to ranks and the
//   buckets are rebuilt after the first iteration. Here the ownership is ZeRO's own partition,
//   independent of the buckets, so the hook steps correctly from the first iteration: no warm-up,
//   no lost steps. It requires every parameter to get a gradient in every iteration (no
//   find_unused_parameters), as PyTorch's hook does, and rules out clipping the gradients before
//   the step (the step happens before the last gradient exists).
#pragma once

#include <memory>
#include <string>

#include "distributed/hooks/comm_hook.h"
#include "distributed/optim/zero_redundancy_optimizer.h"

namespace ember::distributed {

// Registered with ddp.register_comm_hook(std::make_unique<ZeroStepCommHook>(zero)); `zero` must
// have overlap_with_ddp set, share the DDP's parameters, and outlive the DDP module. Collective:
// every rank of zero's group builds it at the same point (it makes the broadcasts' communicator).
class ZeroStepCommHook final : public CommHookInterface {
 public:
  explicit ZeroStepCommHook(ZeroRedundancyOptimizer& zero);
  FuturePtr run_hook(GradBucket& bucket) override;
  std::string name() const override { return "zero_step (ZeroRedundancyOptimizer overlap_with_ddp)"; }

 private:
  ZeroRedundancyOptimizer& zero_;
  // Over the same ranks as zero's group, with a communicator (and worker) of its own.
  std::shared_ptr<const ParameterExchange> exchange_;
};

}  // namespace ember::distributed
