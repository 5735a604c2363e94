#include "autograd/variable.h"

#include <atomic>

#include "autograd/accumulate_grad.h"
#include "autograd/engine.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::autograd {

void AutogradMeta::set_requires_grad(bool requires_grad, TensorImpl* self) {
  EMBER_CHECK(!requires_grad || is_floating_point(self->dtype()),
              "set_requires_grad: only tensors of floating point dtype can require gradients, got ",
              dtype_name(self->dtype()));
  EMBER_CHECK(grad_fn_ == nullptr || requires_grad,
              "set_requires_grad: you can only change requires_grad flags of leaf tensors; use "
              "detach() to get a tensor that does not require grad");
  requires_grad_ = requires_grad;
}

namespace impl {

AutogradMeta* meta_if_exists(const Tensor& t) {
  return static_cast<AutogradMeta*>(t.unsafe_impl()->autograd_meta());
}

AutogradMeta& meta(const Tensor& t) {
  TensorImpl* self = t.unsafe_impl();
  EMBER_CHECK(self != nullptr, "autograd: undefined tensor");
  if (!self->autograd_meta()) self->set_autograd_meta(std::make_shared<AutogradMeta>());
  return *static_cast<AutogradMeta*>(self->autograd_meta());
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& node, bool is_view) {
  AutogradMeta& m = meta(t);
  m.grad_fn_ = node;
  m.output_nr_ = 0;
  m.is_view_of_grad_base_ = is_view;
}

std::shared_ptr<AccumulateGrad> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& m = meta(leaf);
  EMBER_CHECK(m.grad_fn_ == nullptr, "grad_accumulator: only leaf tensors have one");
  EMBER_CHECK(m.requires_grad_, "grad_accumulator: the tensor does not require grad");
  if (auto acc = m.grad_accumulator_.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf);
  m.grad_accumulator_ = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = t.defined() ? meta_if_exists(t) : nullptr;
  if (m == nullptr) return Edge{};
  if (m->grad_fn_) return Edge{m->grad_fn_, m->output_nr_};
  if (m->requires_grad_) return Edge{grad_accumulator(t), 0};
  return Edge{};
}

}  // namespace impl

uint64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                            std::function<void(const Tensor&)> hook) {
  EMBER_CHECK(leaf.requires_grad() && leaf.is_leaf(),
              "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad, got ",
              leaf.describe());
  static std::atomic<uint64_t> next_handle{1};
  const uint64_t h = next_handle.fetch_add(1);
  impl::meta(leaf).post_accumulate_hooks_.emplace_back(h, std::move(hook));
  return h;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t handle) {
  auto& hooks = impl::meta(leaf).post_accumulate_hooks_;
  for (auto it = hooks.begin(); it != hooks.end(); ++it) {
    if (it->first == handle) {
      hooks.erase(it);
      return;
    }
  }
  EMBER_THROW("remove_post_accumulate_grad_hook: no hook with handle ", handle, " on ",
              leaf.describe());
}

namespace {

class VariableHooks final : public VariableHooksInterface {
 public:
  std::shared_ptr<AutogradMetaInterface> make_autograd_meta() const override {
    return std::make_shared<AutogradMeta>();
  }

  const std::shared_ptr<Node>& grad_fn(const Tensor& self) const override {
    return impl::meta(self).grad_fn_;
  }

  bool is_leaf(const Tensor& self) const override { return impl::meta(self).grad_fn_ == nullptr; }

  Tensor detach(const Tensor& self) const override {
    EMBER_CHECK(!self.is_sparse(), "detach: not supported for sparse tensors");
    return Tensor(std::make_shared<TensorImpl>(self.storage(), self.sizes(), self.strides(),
                                               self.storage_offset(), self.dtype(),
                                               self.unsafe_impl()->version_counter()));
  }

  void retain_grad(const Tensor& self) const override {
    EMBER_CHECK(self.requires_grad(), "retain_grad: can't retain_grad on a tensor that has "
                "requires_grad=false");
    AutogradMeta& m = impl::meta(self);
    if (!m.grad_fn_ || m.retains_grad_) return;  // leaves keep their grad anyway
    std::weak_ptr<TensorImpl> weak = self.impl_ptr();
    m.retains_grad_hook_ = m.grad_fn_->add_pre_hook(m.output_nr_, [weak](const Tensor& g) {
      if (auto impl = weak.lock()) {
        Tensor& grad = impl::meta(Tensor(impl)).grad_;
        grad = grad.defined() ? add(grad, g) : g.clone();
      }
      return Tensor();
    });
    m.retains_grad_ = true;
  }

  bool retains_grad(const Tensor& self) const override { return impl::meta(self).retains_grad_; }

  void backward(const Tensor& self, const Tensor& gradient, bool retain_graph) const override {
    run_backward({self}, {gradient}, retain_graph);
  }

  uint64_t register_hook(const Tensor& self, GradHook hook) const override {
    EMBER_CHECK(self.requires_grad(), "register_hook: cannot register a hook on a tensor that "
                "doesn't require gradient");
    AutogradMeta& m = impl::meta(self);
    if (m.grad_fn_) return m.grad_fn_->add_pre_hook(m.output_nr_, std::move(hook));
    return impl::grad_accumulator(self)->add_pre_hook(0, std::move(hook));
  }

  void remove_hook(const Tensor& self, uint64_t handle) const override {
    AutogradMeta& m = impl::meta(self);
    bool removed = m.grad_fn_ ? m.grad_fn_->remove_pre_hook(handle)
                              : impl::grad_accumulator(self)->remove_pre_hook(handle);
    EMBER_CHECK(removed, "remove_hook: no hook with handle ", handle, " on ", self.describe());
  }
};

// Registered when the autograd library is linked (the target is alwayslink).
const bool kRegistered = [] {
  static VariableHooks hooks;
  set_variable_hooks(&hooks);
  return true;
}();

}  // namespace
}  // namespace ember::autograd
