// Batch normalisation over [N, C, ...]: checks, running statistics and the per-channel
// coefficients here; the passes over the data are the device's kernels
// (tensor/cpu/batch_norm_kernels.cc): statistics, scale-and-shift, the closed-form backward.
#include <cmath>

#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/kernels.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

BatchNormShape check_bn(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const Tensor& running_mean, const Tensor& running_var) {
  EMBER_CHECK(input.defined() && input.dim() >= 2, op, ": expected an input [N, C, ...], got ",
              input.describe());
  const int64_t C = input.size(1);
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    if (!t->defined()) continue;
    EMBER_CHECK(t->dim() == 1 && t->size(0) == C, op, ": per-channel tensor ", t->describe(),
                " must have ", C, " elements to match input ", input.describe());
    EMBER_CHECK(t->device() == input.device(), op, ": per-channel tensor ", t->describe(),
                " must be on the input's device (", input.describe(), ")");
  }
  const int64_t N = input.size(0);
  return BatchNormShape{N, C, N * C == 0 ? 0 : input.numel() / (N * C)};
}

// The C per-channel values the coefficients are computed from, on the host (one copy from a
// device tensor).
std::vector<double> channel_values(const Tensor& t, int64_t C, double fill) {
  std::vector<double> v(C, fill);
  if (!t.defined()) return v;
  Tensor c = t.to(kFloat64).cpu().contiguous();
  const double* p = c.data_ptr<double>();
  for (int64_t i = 0; i < C; ++i) v[i] = p[i];
  return v;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm_forward(const Tensor& input, const Tensor& weight,
                                                      const Tensor& bias, const Tensor& running_mean,
                                                      const Tensor& running_var, bool training,
                                                      double momentum, double eps) {
  const BatchNormShape s = check_bn("batch_norm", input, weight, bias, running_mean, running_var);
  EMBER_CHECK(training || (running_mean.defined() && running_var.defined()),
              "batch_norm: running_mean and running_var are required in eval mode");
  const int64_t M = s.N * s.inner;
  EMBER_CHECK(!training || M > 1, "batch_norm: expected more than 1 value per channel when ",
              "training, got input size ", input.shape_str());
  Tensor in = input.contiguous();
  Tensor out = empty(input.sizes(), TensorOptions(input.dtype(), input.device()));
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "batch_norm: supports float32 and float64, got ", input.describe());
  std::vector<double> mean(s.C), var(s.C), invstd(s.C);
  if (training) {
    kernel_for(&KernelTable::batch_norm_stats, "batch_norm", {&in})(in, s, mean.data(),
                                                                    var.data());
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      // running = (1 - momentum) * running + momentum * batch statistic, in double on the host.
      std::vector<double> rm = channel_values(running_mean, s.C, 0.0);
      std::vector<double> rv = channel_values(running_var, s.C, 1.0);
      for (int64_t c = 0; c < s.C; ++c) {
        rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
        rv[c] = (1 - momentum) * rv[c] + momentum * (var[c] * M / (M - 1));
      }
      copy_(running_mean, from_vector<double>(rm));
      copy_(running_var, from_vector<double>(rv));
    }
  } else {
    mean = channel_values(running_mean, s.C, 0.0);
    var = channel_values(running_var, s.C, 1.0);
  }
  for (int64_t c = 0; c < s.C; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
  const std::vector<double> w = channel_values(weight, s.C, 1.0);
  const std::vector<double> b = channel_values(bias, s.C, 0.0);
  std::vector<double> scale(s.C), shift(s.C);
  for (int64_t c = 0; c < s.C; ++c) {
    scale[c] = w[c] * invstd[c];
    shift[c] = b[c] - mean[c] * w[c] * invstd[c];
  }
  kernel_for(&KernelTable::batch_norm_transform, "batch_norm", {&in})(out, in, s, scale.data(),
                                                                      shift.data());
  const TensorOptions like_input(input.dtype(), input.device());
  Tensor mean_t = from_vector<double>(mean).to(like_input.dtype).to(like_input.device);
  Tensor invstd_t = from_vector<double>(invstd).to(like_input.dtype).to(like_input.device);
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
  const BatchNormShape s = check_bn("batch_norm_backward", input, weight, Tensor(), mean, invstd);
  const int64_t M = s.N * s.inner;
  Tensor in = input.contiguous();
  Tensor go = grad_out.contiguous().to(input.dtype());
  const TensorOptions like_input(input.dtype(), input.device());
  Tensor grad_input = mask[0] ? empty(input.sizes(), like_input) : Tensor();
  std::vector<double> sum_g(s.C, 0.0), sum_gx(s.C, 0.0);
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "batch_norm_backward: supports float32 and float64, got ", input.describe());
  const std::vector<double> mu = channel_values(mean, s.C, 0.0);
  const std::vector<double> is = channel_values(invstd, s.C, 1.0);
  const std::vector<double> w = channel_values(weight, s.C, 1.0);
  kernel_for(&KernelTable::batch_norm_backward_reduce, "batch_norm_backward", {&go, &in})(
      go, in, s, mu.data(), sum_g.data(), sum_gx.data());
  if (mask[0]) {
    // dx = w*invstd * (g - mean(g) - xhat * mean(g * xhat)) in training; w*invstd * g in eval.
    std::vector<double> a(s.C), b(s.C), d(s.C);
    for (int64_t c = 0; c < s.C; ++c) {
      a[c] = w[c] * is[c];
      b[c] = a[c] * sum_g[c] / M;
      d[c] = a[c] * sum_gx[c] * is[c] * is[c] / M;
    }
    BatchNormBackwardCoefficients k;
    k.a = a.data();
    if (training) {
      k.b = b.data();
      k.d = d.data();
      k.mean = mu.data();
    }
    kernel_for(&KernelTable::batch_norm_backward_transform, "batch_norm_backward",
               {&go, &in})(grad_input, go, in, s, k);
  }
  Tensor grad_weight, grad_bias;
  if (mask[1]) {
    std::vector<double> gw(s.C);
    for (int64_t c = 0; c < s.C; ++c) gw[c] = sum_gx[c] * is[c];
    grad_weight = from_vector<double>(gw).to(input.dtype()).to(input.device());
  }
  if (mask[2]) grad_bias = from_vector<double>(sum_g).to(input.dtype()).to(input.device());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace ember
