#include "autograd/accumulate_grad.h"

#include "autograd/variable.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::autograd {

AccumulateGrad::AccumulateGrad(Tensor variable)
    : Node(kAccumulateGradSequenceNr), variable_(std::move(variable)) {}

uint64_t AccumulateGrad::add_post_hook(std::function<void(const Tensor&)> hook) {
  const uint64_t h = next_hook_handle();
  post_hooks_.push_back(PostHook{h, std::move(hook)});
  return h;
}

bool AccumulateGrad::remove_post_hook(uint64_t handle) {
  for (auto it = post_hooks_.begin(); it != post_hooks_.end(); ++it) {
    if (it->handle == handle) {
      post_hooks_.erase(it);
      return true;
    }
  }
  return false;
}

void AccumulateGrad::accumulate(const Tensor& variable, Tensor&& new_grad) {
  NoGradGuard no_grad;
  Tensor& grad = impl::meta(variable).grad_;
  if (!grad.defined()) {
    // Steal the buffer when this handle is its only owner and it is laid out densely; a copy
    // otherwise, so a later in-place accumulation cannot write into someone else's tensor.
    const bool sole_owner = new_grad.is_sparse()
                                ? new_grad.impl_ptr().use_count() == 1
                                : new_grad.impl_ptr().use_count() == 1 &&
                                      new_grad.storage().use_count() == 1 &&
                                      new_grad.is_contiguous();
    grad = sole_owner ? std::move(new_grad)
                      : (new_grad.is_sparse() ? new_grad : new_grad.clone());
    return;
  }
  if (grad.is_sparse() && new_grad.is_sparse()) {
    grad = sparse_add(grad, new_grad);
  } else if (grad.is_sparse()) {
    grad = add(to_dense(grad), new_grad);
  } else if (new_grad.is_sparse()) {
    add_sparse_to_dense_(grad, new_grad);
  } else {
    add_(grad, new_grad);  // in place: DDP's bucket views alias .grad
  }
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  EMBER_INTERNAL_ASSERT(grads.size() == 1);
  // Node post hooks run even when no gradient arrived (as PyTorch's engine runs them): DDP's
  // Reducer must hear about every parameter the backward graph reaches (docs/design.md step 8).
  if (!grads[0].defined()) {
    for (const PostHook& h : post_hooks_) h.fn(variable_);
    return {};
  }
  accumulate(variable_, std::move(grads[0]));
  for (const PostHook& h : post_hooks_) h.fn(variable_);
  // Copy: a hook may register or remove hooks while we iterate.
  auto tensor_hooks = impl::meta(variable_).post_accumulate_hooks_;
  for (const auto& h : tensor_hooks) h.second(variable_);
  return {};
}

}  // namespace ember::autograd
