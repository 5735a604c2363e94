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

// Note [Per-channel batch-norm values stay on the device]
// The statistics, running averages and coefficients are [C] float64 tensors on the input's device,
// computed with tensor ops, and the kernels get their data pointers. On a GPU, arrays in host
// memory cost a synchronisation per read-back, about ten for each batch-norm layer in a training
// step; with them a ResNet-20 step on an H200 was issued no faster than the device ran it. The
// arithmetic is the same float64 operations, in the same order, as the host loops it replaced.

// t as C contiguous doubles on its device, or C copies of `fill` on `device` for an undefined t.
Tensor channel_values(const Tensor& t, int64_t C, double fill, Device device) {
  if (!t.defined()) return full({C}, fill, TensorOptions(kFloat64, device));
  return t.to(kFloat64).contiguous();
}

double* doubles(const Tensor& t) { return t.data_ptr<double>(); }

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
  NoGradGuard no_grad;  // the per-channel arithmetic is not part of any graph
  const Device device = input.device();
  Tensor mean, var;
  if (training) {
    mean = empty({s.C}, TensorOptions(kFloat64, device));
    var = empty({s.C}, TensorOptions(kFloat64, device));
    kernel_for(&KernelTable::batch_norm_stats, "batch_norm", {&in})(in, s, doubles(mean),
                                                                    doubles(var));
    if (running_mean.defined()) {
      // running = (1 - momentum) * running + momentum * batch statistic, in float64.
      const Tensor rm = channel_values(running_mean, s.C, 0.0, device);
      const Tensor rv = channel_values(running_var, s.C, 1.0, device);
      const Tensor unbiased = div(mul(var, static_cast<double>(M)), static_cast<double>(M - 1));
      copy_(running_mean, add(mul(rm, 1 - momentum), mul(mean, momentum)));
      copy_(running_var, add(mul(rv, 1 - momentum), mul(unbiased, momentum)));
    }
  } else {
    mean = channel_values(running_mean, s.C, 0.0, device);
    var = channel_values(running_var, s.C, 1.0, device);
  }
  const Tensor invstd = rsqrt(add(var, eps));
  const Tensor w = channel_values(weight, s.C, 1.0, device);
  const Tensor b = channel_values(bias, s.C, 0.0, device);
  const Tensor scale = mul(w, invstd);
  const Tensor shift = sub(b, mul(mul(mean, w), invstd));
  kernel_for(&KernelTable::batch_norm_transform, "batch_norm", {&in})(out, in, s, doubles(scale),
                                                                      doubles(shift));
  // In eval, mean may be running_mean itself (float64): the saved statistic is a copy, as before.
  return {out, mean.to(input.dtype(), /*copy=*/true), invstd.to(input.dtype())};
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
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "batch_norm_backward: supports float32 and float64, got ", input.describe());
  NoGradGuard no_grad;  // Note [Per-channel batch-norm values stay on the device]
  const Device device = input.device();
  const Tensor mu = channel_values(mean, s.C, 0.0, device);
  const Tensor is = channel_values(invstd, s.C, 1.0, device);
  const Tensor w = channel_values(weight, s.C, 1.0, device);
  const Tensor sum_g = empty({s.C}, TensorOptions(kFloat64, device));
  const Tensor sum_gx = empty({s.C}, TensorOptions(kFloat64, device));
  kernel_for(&KernelTable::batch_norm_backward_reduce, "batch_norm_backward", {&go, &in})(
      go, in, s, doubles(mu), doubles(sum_g), doubles(sum_gx));
  if (mask[0]) {
    // dx = w*invstd * (g - mean(g) - xhat * mean(g * xhat)) in training; w*invstd * g in eval.
    const Tensor a = mul(w, is);
    Tensor b, d;
    BatchNormBackwardCoefficients k;
    k.a = doubles(a);
    if (training) {
      b = div(mul(a, sum_g), static_cast<double>(M));
      d = div(mul(mul(mul(a, sum_gx), is), is), static_cast<double>(M));
      k.b = doubles(b);
      k.d = doubles(d);
      k.mean = doubles(mu);
    }
    kernel_for(&KernelTable::batch_norm_backward_transform, "batch_norm_backward",
               {&go, &in})(grad_input, go, in, s, k);
  }
  Tensor grad_weight, grad_bias;
  if (mask[1]) grad_weight = mul(sum_gx, is).to(input.dtype());
  if (mask[2]) grad_bias = sum_g.to(input.dtype());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace ember
