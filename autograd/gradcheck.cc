#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/engine.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::autograd {
namespace {

// A 0-d view of the j-th element (row-major over sizes) of t, any layout, any device: reading
// and perturbing it go through item() and fill_, so device inputs are checked in place too.
Tensor element(const Tensor& t, int64_t j) {
  int64_t offset = t.storage_offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t size = t.sizes()[d];
    offset += (j % size) * t.strides()[d];
    j /= size;
  }
  return t.as_strided({}, {}, offset);
}

std::vector<double> flatten_values(const Tensor& t) {
  std::vector<double> v(t.numel());
  Tensor c = t.detach().to(kFloat64).cpu().contiguous();
  const double* p = c.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = p[i];
  return v;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions opt) {
  for (const Tensor& x : inputs) {
    EMBER_CHECK(x.dtype() == kFloat64, "gradcheck: inputs must be float64, got ", x.describe());
  }
  Tensor out = fn(inputs);
  EMBER_CHECK(out.requires_grad(), "gradcheck: the function's output does not require grad");
  const int64_t n_out = out.numel();

  // analytic[i][k * numel_i + j] = d out_k / d x_i[j]
  std::vector<std::vector<double>> analytic(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) analytic[i].assign(n_out * inputs[i].numel(), 0.0);
  for (int64_t k = 0; k < n_out; ++k) {
    for (const Tensor& x : inputs) x.mutable_grad() = Tensor();
    Tensor seed = zeros(out.sizes(), out.dtype());
    static_cast<double*>(seed.data_ptr())[k] = 1.0;  // seed is contiguous float64
    run_backward({out}, {seed.to(out.device())}, /*retain_graph=*/true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& g = inputs[i].grad();
      if (!g.defined()) continue;
      std::vector<double> gv = flatten_values(g);
      for (int64_t j = 0; j < inputs[i].numel(); ++j) analytic[i][k * inputs[i].numel() + j] = gv[j];
    }
  }
  for (const Tensor& x : inputs) x.mutable_grad() = Tensor();

  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    for (int64_t j = 0; j < x.numel(); ++j) {
      const Tensor p = element(x, j);
      const double orig = p.item<double>();
      fill_(p, orig + opt.eps);
      std::vector<double> plus = flatten_values(fn(inputs));
      fill_(p, orig - opt.eps);
      std::vector<double> minus = flatten_values(fn(inputs));
      fill_(p, orig);
      for (int64_t k = 0; k < n_out; ++k) {
        const double numeric = (plus[k] - minus[k]) / (2 * opt.eps);
        const double a = analytic[i][k * x.numel() + j];
        if (std::fabs(a - numeric) > opt.atol + opt.rtol * std::fabs(numeric)) {
          return GradcheckResult{false, detail::str_cat("gradcheck: d out[", k, "] / d input", i, "[", j,
                                                        "]: analytic ", a, " vs numeric ", numeric,
                                                        " (input ", x.describe(), ")")};
        }
      }
    }
  }
  return GradcheckResult{};
}

}  // namespace ember::autograd
