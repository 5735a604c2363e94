// AccumulateGrad: the sink node of a leaf tensor. It adds the incoming gradient into the leaf's
// .grad (stealing the buffer when nobody else holds it, copying otherwise, adding in place after
// that) and then runs its post hooks in registration order, also when the incoming gradient is
// undefined (the tensor-level post-accumulate hooks run only after a real accumulation). DDP's
// Reducer registers its autograd_hook here (docs/design.md step 5 and 8).
#pragma once

#include <functional>
#include <vector>

#include "autograd/node.h"

namespace ember::autograd {

// The backward node at a leaf tensor that requires grad (PyTorch's AccumulateGrad): owns the leaf,
// adds each incoming gradient into its .grad, then runs the post hooks in registration order.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  variable_list apply(variable_list&& grads) override;

  const Tensor& variable() const { return variable_; }
  uint64_t add_post_hook(std::function<void(const Tensor&)> hook);
  bool remove_post_hook(uint64_t handle);

  // .grad += new_grad with PyTorch's rules (dense/sparse in any mix); runs without recording.
  static void accumulate(const Tensor& variable, Tensor&& new_grad);

 private:
  // The graph owns this node and the node owns its leaf (the leaf's meta points back weakly).
  Tensor variable_;
  struct PostHook {
    uint64_t handle;
    std::function<void(const Tensor&)> fn;
  };
  std::vector<PostHook> post_hooks_;
};

}  // namespace ember::autograd
