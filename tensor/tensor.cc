#include "tensor/tensor.h"

#include "tensor/ops.h"

namespace ember {

#define EMBER_INSTANTIATE_DATA_PTR(cpp, st) template cpp* Tensor::data_ptr<cpp>() const;
EMBER_FORALL_CPP_TYPES(EMBER_INSTANTIATE_DATA_PTR)
#undef EMBER_INSTANTIATE_DATA_PTR

const TensorImpl& Tensor::impl() const {
  EMBER_CHECK(impl_ != nullptr, "operation on an undefined tensor (default-constructed Tensor)");
  return *impl_;
}

// wrap_dim lets a 0-dim tensor accept dim 0/-1 (for ops like sum), but there is no size to read.
int64_t Tensor::size(int64_t d) const {
  EMBER_CHECK(dim() > 0, "size: dimension ", d, " specified for a 0-dim tensor (", describe(), ")");
  return sizes()[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  EMBER_CHECK(dim() > 0, "stride: dimension ", d, " specified for a 0-dim tensor (", describe(), ")");
  return strides()[wrap_dim(d, dim(), "stride")];
}

bool Tensor::is_alias_of(const Tensor& other) const {
  return defined() && other.defined() && storage().is_alias_of(other.storage());
}

Scalar Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: expected a tensor with one element, got ", describe());
  Tensor c = is_cpu() ? *this : to(kCPU);
  return EMBER_DISPATCH_ALL_TYPES(dtype(), "item", [&]() -> Scalar {
    return Scalar(*static_cast<const scalar_t*>(c.data_ptr()));
  });
}

std::string Tensor::shape_str() const { return shape_to_string(sizes()); }

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return detail::str_cat(is_sparse() ? "sparse " : "", dtype_name(dtype()), shape_to_string(sizes()),
                         " on ", device().str());
}

bool Tensor::requires_grad() const {
  const AutogradMetaInterface* m = impl().autograd_meta();
  return m != nullptr && m->requires_grad();
}

const Tensor& Tensor::set_requires_grad(bool requires_grad) const {
  TensorImpl* self = impl_.get();
  EMBER_CHECK(self != nullptr, "set_requires_grad: undefined tensor");
  if (!self->autograd_meta()) {
    if (!requires_grad) return *this;
    self->set_autograd_meta(variable_hooks().make_autograd_meta());
  }
  self->autograd_meta()->set_requires_grad(requires_grad, self);
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor kUndefined;
  const AutogradMetaInterface* m = impl().autograd_meta();
  return m ? m->grad() : kUndefined;
}

Tensor& Tensor::mutable_grad() const {
  TensorImpl* self = impl_.get();
  EMBER_CHECK(self != nullptr, "mutable_grad: undefined tensor");
  if (!self->autograd_meta()) self->set_autograd_meta(variable_hooks().make_autograd_meta());
  return self->autograd_meta()->mutable_grad();
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  return impl().autograd_meta() ? variable_hooks().grad_fn(*this) : kNone;
}

bool Tensor::is_leaf() const { return !impl().autograd_meta() || variable_hooks().is_leaf(*this); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  variable_hooks().backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const {
  if (!impl().autograd_meta()) {
    return Tensor(std::make_shared<TensorImpl>(storage(), sizes(), strides(), storage_offset(),
                                               dtype(), impl().version_counter()));
  }
  return variable_hooks().detach(*this);
}

void Tensor::retain_grad() const { variable_hooks().retain_grad(*this); }
bool Tensor::retains_grad() const {
  return impl().autograd_meta() && variable_hooks().retains_grad(*this);
}

uint64_t Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  return variable_hooks().register_hook(*this, std::move(hook));
}
void Tensor::remove_hook(uint64_t handle) const { variable_hooks().remove_hook(*this, handle); }

Tensor Tensor::to(ScalarType t, bool copy) const { return to_dtype(*this, t, copy); }
Tensor Tensor::to(Device d, bool copy) const { return to_device(*this, d, copy); }
Tensor Tensor::to(Device d, bool copy, bool non_blocking) const {
  return to_device(*this, d, copy, non_blocking);
}
Tensor Tensor::pin_memory() const { return ember::pin_memory(*this); }
bool Tensor::is_pinned() const { return ember::is_pinned(*this); }
Tensor Tensor::clone() const { return ember::clone(*this); }
Tensor Tensor::contiguous() const { return ember::contiguous(*this); }
const Tensor& Tensor::copy_(const Tensor& src) const { return ember::copy_(*this, src); }
const Tensor& Tensor::zero_() const { return ember::zero_(*this); }
const Tensor& Tensor::fill_(const Scalar& v) const { return ember::fill_(*this, v); }

Tensor Tensor::view(const Shape& s) const { return ember::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return ember::reshape(*this, s); }
Tensor Tensor::permute(const Shape& d) const { return ember::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return ember::transpose(*this, a, b); }
Tensor Tensor::t() const {
  EMBER_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got ", describe());
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return ember::narrow(*this, d, s, l); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const {
  return ember::slice(*this, d, s, e, st);
}
Tensor Tensor::select(int64_t d, int64_t i) const { return ember::select(*this, d, i); }
Tensor Tensor::expand(const Shape& s) const { return ember::expand(*this, s); }
Tensor Tensor::squeeze() const { return ember::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return ember::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return ember::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return ember::flatten(*this, s, e); }
Tensor Tensor::as_strided(const Shape& s, const Shape& st, int64_t o) const {
  return ember::as_strided(*this, s, st, o);
}

Tensor Tensor::add(const Tensor& o, const Scalar& a) const { return ember::add(*this, o, a); }
Tensor Tensor::sub(const Tensor& o, const Scalar& a) const { return ember::sub(*this, o, a); }
Tensor Tensor::mul(const Tensor& o) const { return ember::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return ember::div(*this, o); }
Tensor Tensor::add(const Scalar& o) const { return ember::add(*this, o); }
Tensor Tensor::sub(const Scalar& o) const { return ember::sub(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return ember::mul(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return ember::div(*this, o); }
Tensor Tensor::pow(const Tensor& e) const { return ember::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return ember::pow(*this, e); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::rsqrt() const { return ember::rsqrt(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
const Tensor& Tensor::relu_() const { return ember::relu_(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::clamp(const Scalar& lo, const Scalar& hi) const { return ember::clamp(*this, lo, hi); }
Tensor Tensor::clamp_min(const Scalar& lo) const { return ember::clamp(*this, lo, std::nullopt); }
Tensor Tensor::clamp_max(const Scalar& hi) const { return ember::clamp(*this, std::nullopt, hi); }
Tensor Tensor::eq(const Tensor& o) const { return ember::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ember::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return ember::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return ember::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return ember::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ember::ge(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return ember::eq(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return ember::ne(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return ember::lt(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return ember::le(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return ember::gt(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return ember::ge(*this, o); }

const Tensor& Tensor::add_(const Tensor& o, const Scalar& a) const { return ember::add_(*this, o, a); }
const Tensor& Tensor::sub_(const Tensor& o, const Scalar& a) const { return ember::sub_(*this, o, a); }
const Tensor& Tensor::mul_(const Tensor& o) const { return ember::mul_(*this, o); }
const Tensor& Tensor::div_(const Tensor& o) const { return ember::div_(*this, o); }
const Tensor& Tensor::add_(const Scalar& o) const { return ember::add_(*this, o); }
const Tensor& Tensor::mul_(const Scalar& o) const { return ember::mul_(*this, o); }
const Tensor& Tensor::div_(const Scalar& o) const { return ember::div_(*this, o); }

Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const Shape& d, bool k) const { return ember::sum(*this, d, k); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const Shape& d, bool k) const { return ember::mean(*this, d, k); }
Tensor Tensor::max() const { return ember::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return ember::max(*this, d, k); }
Tensor Tensor::min() const { return ember::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return ember::min(*this, d, k); }
Tensor Tensor::argmax() const { return ember::argmax(*this); }
Tensor Tensor::argmax(int64_t d, bool k) const { return ember::argmax(*this, d, k); }
Tensor Tensor::var(const Shape& d, bool u, bool k) const { return ember::var(*this, d, u, k); }
Tensor Tensor::var(bool u) const { return ember::var(*this, {}, u, false); }

Tensor Tensor::matmul(const Tensor& o) const { return ember::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return ember::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return ember::bmm(*this, o); }
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return ember::index_select(*this, d, i); }
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return ember::gather(*this, d, i); }
Tensor Tensor::scatter_add(int64_t d, const Tensor& i, const Tensor& s) const {
  return ember::scatter_add(*this, d, i, s);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& a) { return neg(a); }

std::string shape_to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

}  // namespace ember
