#include "tensor/autograd_dispatch.h"

namespace ember {
namespace {
bool needs_grad(const Tensor& t) {
  const AutogradMetaInterface* m = t.defined() ? t.unsafe_impl()->autograd_meta() : nullptr;
  return m != nullptr && m->requires_grad();
}
}  // namespace

AutogradKernels& autograd_kernels() {
  static AutogradKernels kernels;
  return kernels;
}

bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled() || AutoDispatchBelowAutograd::is_active()) return false;
  for (const Tensor* t : inputs) {
    if (needs_grad(*t)) return true;
  }
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled() || AutoDispatchBelowAutograd::is_active()) return false;
  for (const Tensor& t : inputs) {
    if (needs_grad(t)) return true;
  }
  return false;
}

}  // namespace ember
