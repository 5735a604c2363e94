// Reductions over dims with keepdim: sum, mean, var, max/min (values and indices), argmax/argmin.
// Shape and dtype rules follow PyTorch; the loops are the device's `reduce` kernel.
#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace ember {
namespace {

struct ReducePlan {
  std::vector<bool> mask;  // per input dim: reduced?
  Shape keep_shape;        // input shape with 1 on reduced dims
  Shape out_shape;         // keep_shape, or with reduced dims removed
  int64_t count = 1;       // elements per reduction
};

// An empty dims list means every dim (PyTorch's dim=None).
ReducePlan plan_reduction(const char* op, const Tensor& t, const Shape& dims, bool keepdim) {
  ReducePlan p;
  const int64_t n = t.dim();
  p.mask.assign(n, dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, n, op);
    if (n == 0) continue;
    EMBER_CHECK(!p.mask[w], op, ": dim ", w, " appears multiple times in the list of dims ",
                shape_to_string(dims));
    p.mask[w] = true;
  }
  for (int64_t d = 0; d < n; ++d) {
    if (p.mask[d]) {
      p.count *= t.sizes()[d];
      p.keep_shape.push_back(1);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.keep_shape.push_back(t.sizes()[d]);
      p.out_shape.push_back(t.sizes()[d]);
    }
  }
  return p;
}


Tensor run_reduce(const char* op, ReduceKind rop, const Tensor& t, const ReducePlan& p,
                  ScalarType out_dtype) {
  const auto reduce = kernel_for(&KernelTable::reduce, op, {&t});
  Tensor out = empty(p.keep_shape, TensorOptions(out_dtype, t.device()));
  reduce(rop, out, t, p.mask);
  return out.view(p.out_shape);
}

void check_nonempty(const char* op, const Tensor& t, const ReducePlan& p) {
  // Only the reduced slices must be non-empty: max over dim 1 of a [0, 3] tensor is an empty
  // result (as in PyTorch), while max over dim 0, or over everything, has nothing to pick from.
  EMBER_CHECK(p.count > 0, op, ": cannot reduce over a zero-size dimension of ", t.describe(),
              " (expected a non-empty tensor or reduction dim)");
}

}  // namespace

Tensor sum(const Tensor& t, const Shape& dims, bool keepdim) {
  if (auto f = autograd_kernel(&AutogradKernels::sum, {&t})) return f(t, dims, keepdim);
  EMBER_CHECK(t.defined(), "sum: undefined tensor");
  ReducePlan p = plan_reduction("sum", t, dims, keepdim);
  // Integer and bool sums are int64, as in PyTorch.
  const ScalarType dt = is_floating_point(t.dtype()) ? t.dtype() : kInt64;
  return run_reduce("sum", ReduceKind::kSum, t, p, dt);
}

Tensor mean(const Tensor& t, const Shape& dims, bool keepdim) {
  EMBER_CHECK(t.defined(), "mean: undefined tensor");
  EMBER_CHECK(t.is_floating_point(), "mean: input dtype must be floating point, got ", t.describe());
  ReducePlan p = plan_reduction("mean", t, dims, keepdim);
  // Composite (sum, then divide) so autograd needs no formula of its own; 0/0 = NaN when empty.
  return div(sum(t, dims, keepdim), static_cast<double>(p.count));
}

Tensor var(const Tensor& t, const Shape& dims, bool unbiased, bool keepdim) {
  EMBER_CHECK(t.defined(), "var: undefined tensor");
  EMBER_CHECK(t.is_floating_point(), "var: input dtype must be floating point, got ", t.describe());
  ReducePlan p = plan_reduction("var", t, dims, keepdim);
  // Two passes (mean, then squared deviations) in float64 for accuracy.
  Tensor x = t.to(kFloat64);
  Tensor m = mean(x, dims, /*keepdim=*/true);
  Tensor d = sub(x, m);
  Tensor ss = sum(mul(d, d), dims, keepdim);
  const double denom = static_cast<double>(p.count) - (unbiased ? 1.0 : 0.0);
  return div(ss, denom).to(t.dtype());
}

Tensor max(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::max, {&t})) return f(t);
  EMBER_CHECK(t.defined(), "max: undefined tensor");
  ReducePlan p = plan_reduction("max", t, {}, false);
  check_nonempty("max", t, p);
  return run_reduce("max", ReduceKind::kMax, t, p, t.dtype());
}

Tensor min(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::min, {&t})) return f(t);
  EMBER_CHECK(t.defined(), "min: undefined tensor");
  ReducePlan p = plan_reduction("min", t, {}, false);
  check_nonempty("min", t, p);
  return run_reduce("min", ReduceKind::kMin, t, p, t.dtype());
}

std::tuple<Tensor, Tensor> max(const Tensor& t, int64_t dim, bool keepdim) {
  Tensor idx = argmax(t, dim, true);
  Tensor values = gather(t, t.dim() == 0 ? 0 : wrap_dim(dim, t.dim(), "max"), idx);
  if (!keepdim && t.dim() > 0) {
    const int64_t d = wrap_dim(dim, t.dim(), "max");
    return {values.squeeze(d), idx.squeeze(d)};
  }
  return {values, idx};
}

std::tuple<Tensor, Tensor> min(const Tensor& t, int64_t dim, bool keepdim) {
  Tensor idx = argmin(t, dim, true);
  Tensor values = gather(t, t.dim() == 0 ? 0 : wrap_dim(dim, t.dim(), "min"), idx);
  if (!keepdim && t.dim() > 0) {
    const int64_t d = wrap_dim(dim, t.dim(), "min");
    return {values.squeeze(d), idx.squeeze(d)};
  }
  return {values, idx};
}

Tensor argmax(const Tensor& t) {
  EMBER_CHECK(t.defined(), "argmax: undefined tensor");
  ReducePlan p = plan_reduction("argmax", t, {}, false);
  check_nonempty("argmax", t, p);
  return run_reduce("argmax", ReduceKind::kArgMax, t, p, kInt64);
}

Tensor argmax(const Tensor& t, int64_t dim, bool keepdim) {
  EMBER_CHECK(t.defined(), "argmax: undefined tensor");
  ReducePlan p = plan_reduction("argmax", t, {dim}, keepdim);
  check_nonempty("argmax", t, p);
  return run_reduce("argmax", ReduceKind::kArgMax, t, p, kInt64);
}

Tensor argmin(const Tensor& t, int64_t dim, bool keepdim) {
  EMBER_CHECK(t.defined(), "argmin: undefined tensor");
  ReducePlan p = plan_reduction("argmin", t, {dim}, keepdim);
  check_nonempty("argmin", t, p);
  return run_reduce("argmin", ReduceKind::kArgMin, t, p, kInt64);
}

}  // namespace ember
