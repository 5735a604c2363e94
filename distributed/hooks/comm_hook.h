// The communication-hook seam of the Reducer (DESIGN.md step 10): every bucket, the default one
// included, is reduced through a CommHookInterface. The default is AllReduceBySumCommHook — the
// Reducer pre-divides gradients by the world size when it copies them into the bucket, as PyTorch
// does when no hook is registered. User hooks (distributed/hooks/default_hooks.h) divide themselves.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "distributed/hooks/grad_bucket.h"
#include "distributed/process_group.h"
#include "distributed/work.h"

namespace ember::distributed {

class CommHookInterface {
 public:
  virtual ~CommHookInterface() = default;
  // Starts reducing the bucket; the Future's value()[0] is the reduced buffer.
  virtual FuturePtr run_hook(GradBucket& bucket) = 0;
  // The tensor to write back into the bucket (PyTorch's parseHookResult).
  virtual Tensor parse_hook_result(Future& result) { return result.value().at(0); }
  virtual std::string name() const = 0;
  // Whether the Reducer must divide gradients by the world size before calling the hook.
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
// indices and values, concatenated and coalesced). Gradients arrive pre-divided by the world size.
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
