// The communication-hook seam of the Reducer (docs/design.md step 10): every bucket, the default one
// included, is reduced through a CommHookInterface. The default is AllReduceBySumCommHook; who
// divides by the world size is Note [Who divides gradients by the world size] below.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "distributed/hooks/grad_bucket.h"
#include "distributed/process_group.h"
#include "distributed/work.h"

namespace ember::distributed {

// Note [Who divides gradients by the world size]
// DDP averages gradients: each rank's bucket must end up holding sum_over_ranks(grad) / world.
// Exactly one party divides, once:
// - no hook registered (AllReduceBySumCommHook, expects_prescaled_gradients() == true): the
//   Reducer scales each gradient by 1/divisor while copying it into its bucket view, in one
//   mul_out (mark_variable_ready_*), then the hook only sums -- PyTorch's Reducer does the same
//   when comm_hook_ is null; a gradient that already is its view is scaled in place;
// - any other hook (the built-ins in default_hooks.h, PowerSGD, a user's): the bucket arrives
//   un-divided and the hook divides (allreduce_hook scales by the same 1/world before summing,
//   which is why it is bit-identical to the default path; fp16 divides after compressing;
//   PowerSGD divides P Q^T).
// The divisor is the process group's size, fixed at construction -- except on the default path
// under Join with divide_by_initial_world_size=false, where it is the number of ranks that have not
// joined in this iteration (Reducer::divide_factor, reducer_join.cc); hooks keep dividing by the
// group size, as PyTorch's do.

// A DDP communication hook (PyTorch's comm hooks, as a class): run_hook() starts reducing one
// bucket and returns a Future of the result. DistributedDataParallel::register_comm_hook takes one.
class CommHookInterface {
 public:
  virtual ~CommHookInterface() = default;
  // Starts reducing the bucket; the Future's value()[0] is the reduced buffer.
  virtual FuturePtr run_hook(GradBucket& bucket) = 0;
  // The tensor to write back into the bucket (PyTorch's parseHookResult).
  virtual Tensor parse_hook_result(Future& result) { return result.value().at(0); }
  virtual std::string name() const = 0;
  // Whether the Reducer divides gradients before calling the hook: see Note [Who divides
  // gradients by the world size].
  virtual bool expects_prescaled_gradients() const { return false; }
};

// A typed hook: a callable (State&, GradBucket&) -> FuturePtr plus its state (PyTorch's
// register_comm_hook(state, hook)).
template <typename State>
class CppCommHook : public CommHookInterface {
 public:
  using Hook = std::function<FuturePtr(State&, GradBucket&)>;
  CppCommHook(std::shared_ptr<State> state, Hook hook, std::string name)
      : state_(std::move(state)), hook_(std::move(hook)), name_(std::move(name)) {}
  FuturePtr run_hook(GradBucket& bucket) override { return hook_(*state_, bucket); }
  std::string name() const override { return name_; }
  State& state() { return *state_; }

 private:
  std::shared_ptr<State> state_;
  Hook hook_;
  std::string name_;
};

// Sum-allreduce of the bucket (dense: one allreduce of the flat buffer; sparse: an allgather of
// indices and values, concatenated and coalesced). Gradients arrive pre-divided (see the Note).
class AllReduceBySumCommHook final : public CommHookInterface {
 public:
  explicit AllReduceBySumCommHook(ProcessGroupPtr group) : group_(std::move(group)) {}
  FuturePtr run_hook(GradBucket& bucket) override;
  std::string name() const override { return "allreduce_by_sum (default)"; }
  bool expects_prescaled_gradients() const override { return true; }

 private:
  ProcessGroupPtr group_;
};

// Sum over ranks of a sparse COO tensor: allgather nnz, then indices and values, the second round
// chained on the first's future (nothing blocks the caller). The result is coalesced.
FuturePtr allreduce_sparse(ProcessGroup& group, const Tensor& sparse);

}  // namespace ember::distributed
