// Batch normalisation over [N, C, ...] on the CPU: per-channel statistics in one pass (in double),
// a fused scale-and-shift for the output, and the closed-form backward.
#include <cmath>

#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace ember {
namespace {

struct BnShape {
  int64_t N, C, inner;  // input viewed as [N, C, inner]
};

BnShape check_bn(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const Tensor& running_mean, const Tensor& running_var) {
  EMBER_CHECK(input.defined() && input.dim() >= 2, op, ": expected an input [N, C, ...], got ",
              input.describe());
  EMBER_CHECK(input.is_cpu(), "no ", input.device().str(), " kernel for ", op);
  const int64_t C = input.size(1);
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    if (!t->defined()) continue;
    EMBER_CHECK(t->dim() == 1 && t->size(0) == C, op, ": per-channel tensor ", t->describe(),
                " must have ", C, " elements to match input ", input.describe());
  }
  const int64_t N = input.size(0);
  return BnShape{N, C, N * C == 0 ? 0 : input.numel() / (N * C)};
}

template <typename T>
std::vector<double> channel_values(const Tensor& t, int64_t C, double fill) {
  std::vector<double> v(C, fill);
  if (!t.defined()) return v;
  Tensor c = t.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  for (int64_t i = 0; i < C; ++i) v[i] = p[i];
  return v;
}

// Sum of a and of a*(b - shift) over one row, with eight independent partial sums in the
// element type (vectorisable) folded into double once per row.
template <typename T>
void row_sums(const T* a, const T* b, T shift, int64_t n, double& sa, double& sab) {
  T pa[8] = {0, 0, 0, 0, 0, 0, 0, 0}, pb[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      pa[k] += a[i + k];
      pb[k] += a[i + k] * (b[i + k] - shift);
    }
  }
  double ra = 0, rb = 0;
  for (; i < n; ++i) {
    ra += a[i];
    rb += double(a[i]) * (b[i] - shift);
  }
  for (int k = 0; k < 8; ++k) {
    ra += pa[k];
    rb += pb[k];
  }
  sa += ra;
  sab += rb;
}

// Rows of `inner` elements per parallel chunk: about 16K elements, at least one row.
int64_t rows_grain(int64_t inner) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)); }

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm_forward(const Tensor& input, const Tensor& weight,
                                                      const Tensor& bias, const Tensor& running_mean,
                                                      const Tensor& running_var, bool training,
                                                      double momentum, double eps) {
  const BnShape s = check_bn("batch_norm", input, weight, bias, running_mean, running_var);
  EMBER_CHECK(training || (running_mean.defined() && running_var.defined()),
              "batch_norm: running_mean and running_var are required in eval mode");
  const int64_t M = s.N * s.inner;
  EMBER_CHECK(!training || M > 1, "batch_norm: expected more than 1 value per channel when ",
              "training, got input size ", input.shape_str());
  Tensor in = input.contiguous();
  Tensor out = empty(input.sizes(), input.dtype());
  std::vector<double> mean(s.C), invstd(s.C);
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "batch_norm", [&] {
    const scalar_t* x = in.data_ptr<scalar_t>();
    if (training) {
      std::vector<double> var(s.C);
      // Channels are independent: threads split them (Note [Deterministic parallel kernels]).
      parallel_for(0, s.C, 1, [&](int64_t c_begin, int64_t c_end) {
        for (int64_t c = c_begin; c < c_end; ++c) {
          // Shifting by the first value keeps sum-of-squares accurate when |mean| >> std.
          const scalar_t shift = x[c * s.inner];
          double sum = 0, sumsq = 0;
          for (int64_t n = 0; n < s.N; ++n) {
            const scalar_t* p = x + (n * s.C + c) * s.inner;
            double d = 0;
            row_sums(p, p, shift, s.inner, d, sumsq);
            sum += d;
          }
          // sumsq accumulated x*(x - shift): var = E[x(x-shift)] - mean*(mean-shift)
          mean[c] = sum / M;
          var[c] = std::max(sumsq / M - mean[c] * (mean[c] - shift), 0.0);
          invstd[c] = 1.0 / std::sqrt(var[c] + eps);
        }
      });
      if (running_mean.defined()) {
        NoGradGuard no_grad;
        for (int64_t c = 0; c < s.C; ++c) {
          const double unbiased = var[c] * M / (M - 1);
          // running = (1 - momentum) * running + momentum * batch statistic
          Tensor rm = running_mean.select(0, c), rv = running_var.select(0, c);
          fill_(rm, (1 - momentum) * rm.item<double>() + momentum * mean[c]);
          fill_(rv, (1 - momentum) * rv.item<double>() + momentum * unbiased);
        }
      }
    } else {
      mean = channel_values<scalar_t>(running_mean, s.C, 0.0);
      std::vector<double> var = channel_values<scalar_t>(running_var, s.C, 1.0);
      for (int64_t c = 0; c < s.C; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    }
    const std::vector<double> w = channel_values<scalar_t>(weight, s.C, 1.0);
    const std::vector<double> b = channel_values<scalar_t>(bias, s.C, 0.0);
    scalar_t* y = out.data_ptr<scalar_t>();
    parallel_for(0, s.N * s.C, rows_grain(s.inner), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % s.C;
        const scalar_t scale = scalar_t(w[c] * invstd[c]);
        const scalar_t shift = scalar_t(b[c] - mean[c] * w[c] * invstd[c]);
        const scalar_t* p = x + row * s.inner;
        scalar_t* q = y + row * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) q[i] = p[i] * scale + shift;
      }
    });
  });
  Tensor mean_t = from_vector<double>(mean).to(input.dtype());
  Tensor invstd_t = from_vector<double>(invstd).to(input.dtype());
  return {out, mean_t, invstd_t};
}

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps) {
  if (auto f = autograd_kernel(&AutogradKernels::batch_norm, {&input, &weight, &bias})) {
    return f(input, weight, bias, running_mean, running_var, training, momentum, eps);
  }
  return std::get<0>(
      batch_norm_forward(input, weight, bias, running_mean, running_var, training, momentum, eps));
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const Tensor& mean,
                                                       const Tensor& invstd, bool training,
                                                       std::array<bool, 3> mask) {
  const BnShape s = check_bn("batch_norm_backward", input, weight, Tensor(), mean, invstd);
  const int64_t M = s.N * s.inner;
  Tensor in = input.contiguous();
  Tensor go = grad_out.contiguous().to(input.dtype());
  Tensor grad_input = mask[0] ? empty(input.sizes(), input.dtype()) : Tensor();
  std::vector<double> sum_g(s.C, 0.0), sum_gx(s.C, 0.0);
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "batch_norm_backward", [&] {
    const std::vector<double> mu = channel_values<scalar_t>(mean, s.C, 0.0);
    const std::vector<double> is = channel_values<scalar_t>(invstd, s.C, 1.0);
    const std::vector<double> w = channel_values<scalar_t>(weight, s.C, 1.0);
    const scalar_t* x = in.data_ptr<scalar_t>();
    const scalar_t* g = go.data_ptr<scalar_t>();
    parallel_for(0, s.C, 1, [&](int64_t c_begin, int64_t c_end) {
      for (int64_t c = c_begin; c < c_end; ++c) {
        for (int64_t n = 0; n < s.N; ++n) {
          const scalar_t* xp = x + (n * s.C + c) * s.inner;
          const scalar_t* gp = g + (n * s.C + c) * s.inner;
          row_sums(gp, xp, scalar_t(mu[c]), s.inner, sum_g[c], sum_gx[c]);
        }
      }
    });
    if (!mask[0]) return;
    scalar_t* gi = grad_input.data_ptr<scalar_t>();
    parallel_for(0, s.N * s.C, rows_grain(s.inner), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % s.C;
        const scalar_t* xp = x + row * s.inner;
        const scalar_t* gp = g + row * s.inner;
        scalar_t* q = gi + row * s.inner;
        const double k = w[c] * is[c];
        if (training) {
          // dx = w*invstd * (g - mean(g) - xhat * mean(g * xhat))
          const scalar_t a = scalar_t(k), b = scalar_t(k * sum_g[c] / M);
          const scalar_t d = scalar_t(k * sum_gx[c] * is[c] * is[c] / M);
          const scalar_t m = scalar_t(mu[c]);
          for (int64_t i = 0; i < s.inner; ++i) q[i] = a * gp[i] - b - d * (xp[i] - m);
        } else {
          const scalar_t a = scalar_t(k);
          for (int64_t i = 0; i < s.inner; ++i) q[i] = a * gp[i];
        }
      }
    });
  });
  Tensor grad_weight, grad_bias;
  if (mask[1]) {
    std::vector<double> gw(s.C);
    Tensor is = invstd.to(kFloat64).contiguous();
    for (int64_t c = 0; c < s.C; ++c) gw[c] = sum_gx[c] * is.data_ptr<double>()[c];
    grad_weight = from_vector<double>(gw).to(input.dtype());
  }
  if (mask[2]) grad_bias = from_vector<double>(sum_g).to(input.dtype());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace ember
