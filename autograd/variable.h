// AutogradMeta: what autograd keeps per tensor (requires_grad, .grad, grad_fn, the weakly held
// gradient accumulator of a leaf, view/retain_grad flags), and the `impl` helpers that ops and the
// engine use to read and write it. Registers the VariableHooks that Tensor's autograd methods call.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "tensor/autograd_interface.h"
#include "tensor/tensor.h"

namespace ember::autograd {

class AccumulateGrad;

// autograd's state of one tensor (PyTorch's torch::autograd::AutogradMeta), made by impl::meta():
// requires_grad, .grad, grad_fn, a leaf's accumulator (held weakly), view and retain_grad flags.
struct AutogradMeta final : public AutogradMetaInterface {
  bool requires_grad() const override { return requires_grad_ || grad_fn_ != nullptr; }
  void set_requires_grad(bool requires_grad, TensorImpl* self) override;
  Tensor& mutable_grad() override { return grad_; }
  const Tensor& grad() const override { return grad_; }

  Tensor grad_;
  std::shared_ptr<Node> grad_fn_;
  std::weak_ptr<AccumulateGrad> grad_accumulator_;
  uint32_t output_nr_ = 0;
  bool requires_grad_ = false;
  bool retains_grad_ = false;
  uint64_t retains_grad_hook_ = 0;
  // Tensor-level post-accumulate hooks (they outlive any one AccumulateGrad node).
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks_;
  // Set on outputs of view ops whose base requires grad: in-place ops on them are refused.
  bool is_view_of_grad_base_ = false;
};

namespace impl {
// The tensor's AutogradMeta, created on demand.
AutogradMeta& meta(const Tensor& t);
// nullptr when the tensor has none.
AutogradMeta* meta_if_exists(const Tensor& t);
// Makes `node` the grad_fn of `t` (output 0 of the node).
void set_history(const Tensor& t, const std::shared_ptr<Node>& node, bool is_view = false);
// The leaf's AccumulateGrad, created on first use and cached weakly (the graph owns it).
std::shared_ptr<AccumulateGrad> grad_accumulator(const Tensor& leaf);
// Where a gradient for `t` goes: its grad_fn, its accumulator, or an invalid edge.
Edge gradient_edge(const Tensor& t);
}  // namespace impl

// Registers the post-accumulate hook on a leaf's AccumulateGrad (PyTorch 2.1's
// register_post_accumulate_grad_hook); returns a handle for remove_post_accumulate_grad_hook.
uint64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                            std::function<void(const Tensor&)> hook);
void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t handle);

}  // namespace ember::autograd
