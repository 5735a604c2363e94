#include "autograd/functions/function_node.h"

#include "tensor/ops.h"

namespace ember::autograd {

variable_list FunctionNode::apply(variable_list&& grads) {
  EMBER_INTERNAL_ASSERT(grads.size() == 1);
  const size_t n = next_edges().size();
  if (!grads[0].defined()) return variable_list(n);
  variable_list saved;
  saved.reserve(saved_.size());
  for (size_t i = 0; i < saved_.size(); ++i) saved.push_back(saved_[i].unpack(name_, i));
  std::vector<bool> needs(n);
  for (size_t i = 0; i < n; ++i) needs[i] = should_compute_output(i);
  variable_list out = formula_(grads[0], saved, needs);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!needs[i]) out[i] = Tensor();
  }
  return out;
}

void FunctionNode::release_variables() {
  for (SavedVariable& s : saved_) s.reset_data();
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  Shape dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.sizes()[d] != 1)) dims.push_back(d);
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return r.view(shape);
}

namespace {

std::shared_ptr<FunctionNode> make_node(const RecordSpec& spec, BackwardFormula formula) {
  auto node = std::make_shared<FunctionNode>(spec.name, std::move(formula));
  for (const Tensor& t : spec.inputs) node->add_input(impl::gradient_edge(t), t);
  for (const Tensor& t : spec.saved) node->save(t, false);
  return node;
}

}  // namespace

Tensor record_op(const RecordSpec& spec, const std::function<Tensor()>& forward,
                 BackwardFormula formula) {
  Tensor out;
  {
    AutoDispatchBelowAutograd below;
    out = forward();
  }
  auto node = make_node(spec, std::move(formula));
  if (spec.save_output) node->save(out, true);
  if (out.is_same(spec.inputs[0])) {
    // The plain op returned its input unchanged (e.g. a no-op view): give autograd its own handle.
    out = Tensor(std::make_shared<TensorImpl>(out.storage(), out.sizes(), out.strides(),
                                              out.storage_offset(), out.dtype(),
                                              out.unsafe_impl()->version_counter()));
  }
  impl::set_history(out, node, spec.is_view);
  return out;
}

void record_inplace(const RecordSpec& spec, const std::function<void()>& forward,
                    BackwardFormula formula) {
  const Tensor& self = spec.inputs[0];
  AutogradMeta* m = impl::meta_if_exists(self);
  if (m) {
    EMBER_CHECK(!(m->grad_fn_ == nullptr && m->requires_grad_), spec.name,
                ": a leaf tensor that requires grad (", self.describe(),
                ") is being used in an in-place operation; wrap it in NoGradGuard or use an "
                "out-of-place op");
    EMBER_CHECK(!m->is_view_of_grad_base_, spec.name, ": in-place operation on a view (",
                self.describe(), ") of a tensor that requires grad is not supported by ember's ",
                "autograd; use the out-of-place op or clone() the view first");
  }
  auto node = make_node(spec, std::move(formula));  // captures self's edge before the rebase
  {
    AutoDispatchBelowAutograd below;
    forward();
  }
  if (spec.save_output) node->save(self, true);
  impl::set_history(self, node, false);
}

}  // namespace ember::autograd
