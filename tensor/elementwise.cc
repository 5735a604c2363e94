// Elementwise ops: broadcasting, PyTorch's type promotion, output allocation, in-place forms.
// The arithmetic itself lives in the device's kernel table (tensor/kernels.h).
#include <algorithm>
#include <utility>

#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace ember {
namespace {

int category(ScalarType t) {
  if (t == kBool) return 0;
  if (is_integral(t)) return 1;
  return 2;
}

// PyTorch's result_type for two tensors: dimensioned tensors decide within a category; a 0-dim
// tensor only wins when its category is higher.
ScalarType result_type(const Tensor& a, const Tensor& b) {
  const bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  const ScalarType dimmed = za ? b.dtype() : a.dtype();
  const ScalarType zero = za ? a.dtype() : b.dtype();
  return category(zero) > category(dimmed) ? zero : dimmed;
}

// With a Python-style scalar: the scalar only lifts the category, to the default dtype of its kind.
ScalarType result_type(const Tensor& a, const Scalar& s) {
  const ScalarType st = s.default_dtype();
  return category(st) > category(a.dtype()) ? st : a.dtype();
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::kEq || op == BinaryOp::kNe || op == BinaryOp::kLt || op == BinaryOp::kLe ||
         op == BinaryOp::kGt || op == BinaryOp::kGe;
}

ScalarType compute_dtype(BinaryOp op, ScalarType promoted) {
  // True division of integers gives float32, as in PyTorch.
  if (op == BinaryOp::kDiv && !is_floating_point(promoted)) return kFloat32;
  return promoted;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, ScalarType promoted,
              const Scalar& alpha = 1) {
  const char* name = binary_op_name(op);
  const auto binary_kernel = kernel_for(&KernelTable::binary, name, {&a, &b});
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  const ScalarType ct = compute_dtype(op, promoted);
  Tensor out = empty(shape, TensorOptions(is_comparison(op) ? kBool : ct, a.device()));
  binary_kernel(op, out, expand(to_dtype(a, ct), shape), expand(to_dtype(b, ct), shape), alpha);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Scalar& alpha = 1) {
  EMBER_CHECK(a.defined() && b.defined(), binary_op_name(op), ": undefined tensor (",
              a.describe(), ", ", b.describe(), ")");
  return binary(op, a, b, result_type(a, b), alpha);
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, const Scalar& s) {
  EMBER_CHECK(a.defined(), binary_op_name(op), ": undefined tensor");
  const ScalarType rt = result_type(a, s);
  return binary(op, a, scalar_tensor(s, TensorOptions(rt, a.device())), rt);
}

// True when a and b share storage, their byte ranges intersect, and they are not the very same
// view (elementwise read-then-write of the same element is safe).
bool partially_overlaps(const Tensor& a, const Tensor& b) {
  if (!a.is_alias_of(b) || a.numel() == 0 || b.numel() == 0) return false;
  if (a.sizes() == b.sizes() && a.strides() == b.strides() &&
      a.storage_offset() == b.storage_offset()) {
    return false;
  }
  auto span = [](const Tensor& t) {
    int64_t hi = t.storage_offset();
    for (int64_t i = 0; i < t.dim(); ++i) hi += (t.sizes()[i] - 1) * t.strides()[i];
    return std::pair<int64_t, int64_t>(t.storage_offset() * t.element_size(),
                                       (hi + 1) * t.element_size());
  };
  auto [alo, ahi] = span(a);
  auto [blo, bhi] = span(b);
  return alo < bhi && blo < ahi;
}

// In place: self = self (op) other; other broadcasts to self; the result must cast to self's dtype.
const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const char* name = binary_op_name(op);
  EMBER_CHECK(self.defined() && other.defined(), name, "_: undefined tensor (", self.describe(),
              ", ", other.describe(), ")");
  const Shape shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  EMBER_CHECK(shape == self.sizes(), name, "_: output with shape ", self.shape_str(),
              " doesn't match the broadcast shape ", shape_to_string(shape), " (other is ",
              other.describe(), ")");
  const ScalarType ct = compute_dtype(op, result_type(self, other));
  EMBER_CHECK(category(ct) <= category(self.dtype()), name, "_: result type ", ct,
              " can't be cast to the desired output type ", self.dtype());
  if (ct == self.dtype()) {
    const auto binary_kernel = kernel_for(&KernelTable::binary, name, {&self, &other});
    // An operand that overlaps self in another layout (a.add_(a.t())) would be read after the
    // kernel overwrote it; PyTorch refuses this, we read from a copy and give the promised result.
    Tensor o = partially_overlaps(self, other) ? clone(other) : other;
    binary_kernel(op, self, self, expand(to_dtype(o, ct), shape), alpha);
    self.bump_version();
    return self;
  }
  return copy_(self, binary(op, self, other, ct, alpha));
}

const Tensor& binary_scalar_(BinaryOp op, const Tensor& self, const Scalar& s) {
  EMBER_CHECK(self.defined(), binary_op_name(op), "_: undefined tensor");
  return binary_(op, self, scalar_tensor(s, TensorOptions(result_type(self, s), self.device())), 1);
}

Tensor unary(UnaryOp op, const Tensor& t, bool floating_result) {
  const char* name = unary_op_name(op);
  const auto unary_kernel = kernel_for(&KernelTable::unary, name, {&t});
  // exp/log/... of an integer tensor give float32, as in PyTorch.
  const ScalarType dt = floating_result && !is_floating_point(t.dtype()) ? kFloat32 : t.dtype();
  Tensor in = to_dtype(t, dt);
  Tensor out = empty(t.sizes(), TensorOptions(dt, t.device()));
  unary_kernel(op, out, in);
  return out;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_to_string(a), " and ",
                shape_to_string(b), " are not broadcastable (dimension ", i, ": ", da, " vs ",
                db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (auto f = autograd_kernel(&AutogradKernels::add, {&a, &b})) return f(a, b, alpha);
  return binary(BinaryOp::kAdd, a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (auto f = autograd_kernel(&AutogradKernels::sub, {&a, &b})) return f(a, b, alpha);
  return binary(BinaryOp::kSub, a, b, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::mul, {&a, &b})) return f(a, b);
  return binary(BinaryOp::kMul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::div, {&a, &b})) return f(a, b);
  return binary(BinaryOp::kDiv, a, b);
}
Tensor pow(const Tensor& a, const Tensor& e) {
  if (auto f = autograd_kernel(&AutogradKernels::pow, {&a, &e})) return f(a, e);
  return binary(BinaryOp::kPow, a, e);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::maximum, {&a, &b})) return f(a, b);
  return binary(BinaryOp::kMaximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::minimum, {&a, &b})) return f(a, b);
  return binary(BinaryOp::kMinimum, a, b);
}
Tensor add(const Tensor& a, const Scalar& b) {
  if (auto f = autograd_kernel(&AutogradKernels::add_scalar, {&a})) return f(a, b);
  return binary_scalar(BinaryOp::kAdd, a, b);
}
Tensor sub(const Tensor& a, const Scalar& b) {
  if (auto f = autograd_kernel(&AutogradKernels::sub_scalar, {&a})) return f(a, b);
  return binary_scalar(BinaryOp::kSub, a, b);
}
Tensor mul(const Tensor& a, const Scalar& b) {
  if (auto f = autograd_kernel(&AutogradKernels::mul_scalar, {&a})) return f(a, b);
  return binary_scalar(BinaryOp::kMul, a, b);
}
Tensor div(const Tensor& a, const Scalar& b) {
  if (auto f = autograd_kernel(&AutogradKernels::div_scalar, {&a})) return f(a, b);
  return binary_scalar(BinaryOp::kDiv, a, b);
}
Tensor pow(const Tensor& a, const Scalar& e) {
  if (auto f = autograd_kernel(&AutogradKernels::pow_scalar, {&a})) return f(a, e);
  return binary_scalar(BinaryOp::kPow, a, e);
}
Tensor rsub(const Tensor& a, const Scalar& b) {
  if (auto f = autograd_kernel(&AutogradKernels::rsub, {&a})) return f(a, b);
  const ScalarType rt = result_type(a, b);
  return binary(BinaryOp::kSub, scalar_tensor(b, TensorOptions(rt, a.device())), a, rt);
}
Tensor rdiv(const Tensor& a, const Scalar& b) {
  if (auto f = autograd_kernel(&AutogradKernels::rdiv, {&a})) return f(a, b);
  const ScalarType rt = result_type(a, b);
  return binary(BinaryOp::kDiv, scalar_tensor(b, TensorOptions(rt, a.device())), a, rt);
}

Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kEq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kNe, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kLt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kLe, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kGt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kGe, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::kEq, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::kNe, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::kLt, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::kLe, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::kGt, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::kGe, a, b); }

const Tensor& add_(const Tensor& s, const Tensor& o, const Scalar& alpha) {
  if (auto f = autograd_kernel(&AutogradKernels::add_, {&s, &o})) return f(s, o, alpha);
  return binary_(BinaryOp::kAdd, s, o, alpha);
}
const Tensor& sub_(const Tensor& s, const Tensor& o, const Scalar& alpha) {
  if (auto f = autograd_kernel(&AutogradKernels::sub_, {&s, &o})) return f(s, o, alpha);
  return binary_(BinaryOp::kSub, s, o, alpha);
}
const Tensor& mul_(const Tensor& s, const Tensor& o) {
  if (auto f = autograd_kernel(&AutogradKernels::mul_, {&s, &o})) return f(s, o);
  return binary_(BinaryOp::kMul, s, o, 1);
}
const Tensor& div_(const Tensor& s, const Tensor& o) {
  if (auto f = autograd_kernel(&AutogradKernels::div_, {&s, &o})) return f(s, o);
  return binary_(BinaryOp::kDiv, s, o, 1);
}
const Tensor& add_(const Tensor& s, const Scalar& o) {
  if (auto f = autograd_kernel(&AutogradKernels::add_scalar_, {&s})) return f(s, o);
  return binary_scalar_(BinaryOp::kAdd, s, o);
}
const Tensor& mul_(const Tensor& s, const Scalar& o) {
  if (auto f = autograd_kernel(&AutogradKernels::mul_scalar_, {&s})) return f(s, o);
  return binary_scalar_(BinaryOp::kMul, s, o);
}
const Tensor& div_(const Tensor& s, const Scalar& o) {
  if (auto f = autograd_kernel(&AutogradKernels::div_scalar_, {&s})) return f(s, o);
  return binary_scalar_(BinaryOp::kDiv, s, o);
}

const Tensor& mul_out(const Tensor& out, const Tensor& self, const Scalar& other) {
  EMBER_CHECK(out.defined() && self.defined(), "mul_out: undefined tensor (out ", out.describe(), ", self ",
              self.describe(), ")");
  EMBER_CHECK(!GradMode::is_enabled() || !(out.requires_grad() || self.requires_grad()),
              "mul_out: not differentiable (an out= form records no graph), but ",
              self.requires_grad() ? "self " + self.describe() : "out " + out.describe(),
              " has requires_grad=true while grad mode is on; use mul, or call it under NoGradGuard");
  EMBER_CHECK(out.sizes() == self.sizes() && out.device() == self.device(), "mul_out: out is ", out.describe(),
              " but self is ", self.describe(), "; out must have self's shape and device");
  EMBER_CHECK(!partially_overlaps(out, self), "mul_out: out ", out.describe(), " and self ", self.describe(),
              " overlap in different layouts");
  const ScalarType rt = result_type(self, other);
  EMBER_CHECK(category(rt) <= category(out.dtype()), "mul_out: result type ", rt,
              " can't be cast to the desired output type ", out.dtype());
  if (rt != out.dtype()) return copy_(out, binary_scalar(BinaryOp::kMul, self, other));
  const auto binary_kernel = kernel_for(&KernelTable::binary, "mul", {&out, &self});
  binary_kernel(BinaryOp::kMul, out, to_dtype(self, rt),
                expand(scalar_tensor(other, TensorOptions(rt, self.device())), out.sizes()), 1);
  out.bump_version();
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::where, {&a, &b})) return f(cond, a, b);
  const auto where_kernel = kernel_for(&KernelTable::where, "where", {&cond, &a, &b});
  EMBER_CHECK(cond.dtype() == kBool, "where: condition must be a bool tensor, got ", cond.describe());
  const Shape shape =
      broadcast_shapes(cond.sizes(), broadcast_shapes(a.sizes(), b.sizes(), "where"), "where");
  const ScalarType rt = result_type(a, b);
  Tensor out = empty(shape, TensorOptions(rt, a.device()));
  where_kernel(out, expand(cond, shape), expand(to_dtype(a, rt), shape), expand(to_dtype(b, rt), shape));
  return out;
}

Tensor masked_fill(const Tensor& t, const Tensor& mask, const Scalar& value) {
  EMBER_CHECK(t.defined() && mask.defined(), "masked_fill: undefined tensor");
  EMBER_CHECK(mask.dtype() == kBool, "masked_fill: expected a bool mask, got ", mask.describe());
  EMBER_CHECK(mask.device() == t.device(), "masked_fill: mask ", mask.describe(),
              " must be on the device of ", t.describe());
  const Shape shape = broadcast_shapes(t.sizes(), mask.sizes(), "masked_fill");
  EMBER_CHECK(shape == t.sizes(), "masked_fill: mask of shape ", mask.shape_str(),
              " does not broadcast to the tensor's shape ", t.shape_str());
  // The fill keeps t's dtype, as the in-place Tensor.masked_fill_ does.
  return where(mask, scalar_tensor(value, TensorOptions(t.dtype(), t.device())), t);
}

Tensor neg(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::neg, {&t})) return f(t);
  return unary(UnaryOp::kNeg, t, false);
}
Tensor abs(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::abs, {&t})) return f(t);
  return unary(UnaryOp::kAbs, t, false);
}
Tensor relu(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::relu, {&t})) return f(t);
  return unary(UnaryOp::kRelu, t, false);
}
const Tensor& relu_(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::relu_, {&t})) return f(t);
  EMBER_CHECK(t.defined(), "relu_: undefined tensor");
  // Each element is read before it is written, so the kernel may run on its own output.
  kernel_for(&KernelTable::unary, "relu_", {&t})(UnaryOp::kRelu, t, t);
  t.bump_version();
  return t;
}
Tensor sign(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::sign, {&t})) return f(t);
  return unary(UnaryOp::kSign, t, false);
}
Tensor exp(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::exp, {&t})) return f(t);
  return unary(UnaryOp::kExp, t, true);
}
Tensor log(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::log, {&t})) return f(t);
  return unary(UnaryOp::kLog, t, true);
}
Tensor sqrt(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::sqrt, {&t})) return f(t);
  return unary(UnaryOp::kSqrt, t, true);
}
Tensor rsqrt(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::rsqrt, {&t})) return f(t);
  return unary(UnaryOp::kRsqrt, t, true);
}
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  EMBER_CHECK(grad_output.defined() && self.defined(), "threshold_backward: undefined tensor (",
              grad_output.describe(), ", ", self.describe(), ")");
  EMBER_CHECK(self.dtype() != kBool && grad_output.dtype() != kBool,
              "threshold_backward: not supported for bool tensors (", grad_output.describe(), ", ",
              self.describe(), ")");
  EMBER_CHECK(!GradMode::is_enabled() || !(grad_output.requires_grad() || self.requires_grad()),
              "threshold_backward: not differentiable (ember computes no higher-order gradients); ",
              "called on ", grad_output.describe(), ", ", self.describe(), " that require grad");
  return binary(BinaryOp::kThresholdBackward, grad_output, self, threshold);
}
Tensor sigmoid(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::sigmoid, {&t})) return f(t);
  return unary(UnaryOp::kSigmoid, t, true);
}
Tensor tanh(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::tanh, {&t})) return f(t);
  return unary(UnaryOp::kTanh, t, true);
}

GeluApproximation gelu_approximation(const std::string& approximate) {
  if (approximate == "none") return GeluApproximation::kNone;
  if (approximate == "tanh") return GeluApproximation::kTanh;
  EMBER_CHECK(false, "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return GeluApproximation::kNone;
}
Tensor gelu(const Tensor& input, const std::string& approximate) {
  return gelu(input, gelu_approximation(approximate));
}
Tensor gelu(const Tensor& input, GeluApproximation approximate) {
  if (auto f = autograd_kernel(&AutogradKernels::gelu, {&input})) return f(input, approximate);
  EMBER_CHECK(input.defined(), "gelu: undefined input");
  EMBER_CHECK(is_floating_point(input.dtype()), "gelu: expects a floating tensor, got ",
              input.describe());
  return unary(approximate == GeluApproximation::kTanh ? UnaryOp::kGeluTanh : UnaryOp::kGelu,
               input, true);
}
Tensor gelu_backward(const Tensor& grad_out, const Tensor& input, GeluApproximation approximate) {
  EMBER_CHECK(grad_out.defined() && input.defined(), "gelu_backward: undefined tensor");
  const Tensor derivative =
      unary(approximate == GeluApproximation::kTanh ? UnaryOp::kGeluTanhDerivative
                                                    : UnaryOp::kGeluDerivative,
            input, true);
  return mul(grad_out, derivative);
}

Tensor clamp(const Tensor& t, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  if (auto f = autograd_kernel(&AutogradKernels::clamp, {&t})) return f(t, lo, hi);
  const auto clamp_kernel = kernel_for(&KernelTable::clamp, "clamp", {&t});
  EMBER_CHECK(lo.has_value() || hi.has_value(), "clamp: at least one of min or max must be given");
  ScalarType rt = t.dtype();
  if (lo) rt = promote_types(rt, result_type(t, *lo));
  if (hi) rt = promote_types(rt, result_type(t, *hi));
  EMBER_CHECK(rt != kBool, "clamp: not supported for dtype bool");
  Tensor in = to_dtype(t, rt);
  Tensor out = empty(t.sizes(), TensorOptions(rt, t.device()));
  clamp_kernel(out, in, lo, hi);
  return out;
}

}  // namespace ember
