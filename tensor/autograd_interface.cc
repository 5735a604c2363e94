#include "tensor/autograd_interface.h"

#include "tensor/error.h"

namespace ember {
namespace {
thread_local bool t_grad_mode = true;
thread_local bool t_below_autograd = false;
VariableHooksInterface* g_hooks = nullptr;
}  // namespace

bool GradMode::is_enabled() { return t_grad_mode; }
void GradMode::set_enabled(bool enabled) { t_grad_mode = enabled; }

AutoDispatchBelowAutograd::AutoDispatchBelowAutograd() : prev_(t_below_autograd) {
  t_below_autograd = true;
}
AutoDispatchBelowAutograd::~AutoDispatchBelowAutograd() { t_below_autograd = prev_; }
bool AutoDispatchBelowAutograd::is_active() { return t_below_autograd; }

void set_variable_hooks(VariableHooksInterface* hooks) { g_hooks = hooks; }

VariableHooksInterface& variable_hooks() {
  EMBER_CHECK(g_hooks != nullptr,
              "autograd is not linked into this binary: depend on //autograd to use requires_grad, "
              "grad, backward and hooks");
  return *g_hooks;
}

}  // namespace ember
