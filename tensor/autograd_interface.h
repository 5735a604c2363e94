// The seam through which autograd/ attaches to tensors without tensor/ depending on it (PyTorch's
// c10 AutogradMetaInterface / VariableHooksInterface / GradMode). tensor/ stores the metadata and
// consults the dispatch table in tensor/autograd_dispatch.h; autograd/ implements both.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace ember {

class Tensor;
class TensorImpl;
namespace autograd {
class Node;
}

// Per-thread switch for recording the graph (torch.no_grad).
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Sets GradMode for a scope and restores the previous mode when it ends (PyTorch's AutoGradMode):
// AutoGradMode(false) stops recording; AutoGradMode(true) records again inside a no-grad scope.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// Disables graph recording in its scope (PyTorch's torch::NoGradGuard).
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

// Set while an autograd kernel runs the plain op underneath, so the op does not record itself
// again (PyTorch's AutoDispatchBelowAutograd).
class AutoDispatchBelowAutograd {
 public:
  AutoDispatchBelowAutograd();
  ~AutoDispatchBelowAutograd();
  AutoDispatchBelowAutograd(const AutoDispatchBelowAutograd&) = delete;
  AutoDispatchBelowAutograd& operator=(const AutoDispatchBelowAutograd&) = delete;
  static bool is_active();

 private:
  bool prev_;
};

// A tensor's autograd state as tensor/ sees it (c10::AutogradMetaInterface): requires_grad and
// .grad. autograd/ implements it (autograd::AutogradMeta) and creates it when a tensor needs one.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
  virtual bool requires_grad() const = 0;
  virtual void set_requires_grad(bool requires_grad, TensorImpl* self) = 0;
  virtual Tensor& mutable_grad() = 0;
  virtual const Tensor& grad() const = 0;
};

// Implemented and registered by autograd/ (autograd/variable.cc); Tensor's autograd methods
// forward here. Without autograd linked they throw a clear error.
class VariableHooksInterface {
 public:
  virtual ~VariableHooksInterface() = default;
  virtual std::shared_ptr<AutogradMetaInterface> make_autograd_meta() const = 0;
  virtual const std::shared_ptr<autograd::Node>& grad_fn(const Tensor& self) const = 0;
  virtual bool is_leaf(const Tensor& self) const = 0;
  virtual Tensor detach(const Tensor& self) const = 0;
  virtual void retain_grad(const Tensor& self) const = 0;
  virtual bool retains_grad(const Tensor& self) const = 0;
  virtual void backward(const Tensor& self, const Tensor& gradient, bool retain_graph) const = 0;
  // Hook on the gradient flowing into `self`; may return a replacement (or undefined = keep).
  virtual uint64_t register_hook(const Tensor& self,
                                 std::function<Tensor(const Tensor&)> hook) const = 0;
  virtual void remove_hook(const Tensor& self, uint64_t handle) const = 0;
};

void set_variable_hooks(VariableHooksInterface* hooks);
// Throws "autograd is not linked" when autograd/ is not part of the binary.
VariableHooksInterface& variable_hooks();

}  // namespace ember
