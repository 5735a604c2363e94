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

const std::vector<const char*>& autograd_slot_names() {
  static const std::vector<const char*> names = {
#define EMBER_AUTOGRAD_SLOT_NAME(name, signature) #name,
      EMBER_FORALL_AUTOGRAD_SLOTS(EMBER_AUTOGRAD_SLOT_NAME)
#undef EMBER_AUTOGRAD_SLOT_NAME
  };
  return names;
}

std::vector<bool> autograd_slots_filled(const AutogradKernels& kernels) {
  return {
#define EMBER_AUTOGRAD_SLOT_FILLED(name, signature) kernels.name != nullptr,
      EMBER_FORALL_AUTOGRAD_SLOTS(EMBER_AUTOGRAD_SLOT_FILLED)
#undef EMBER_AUTOGRAD_SLOT_FILLED
  };
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
