// Batch normalisation over [N, C, ...]: checks, running statistics and the per-channel
// coefficients here; the passes over the data are the device's kernels
// (tensor/cpu/batch_norm_kernels.cc): statistics, scale-and-shift, the closed-form backward.
#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <vector>

#include "tensor/autograd_dispatch.h"
#include "tensor/batch_norm_channels.h"
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
// The statistics, running averages and coefficients of a GPU tensor are [C] float64 tensors on its
// device, computed with tensor ops, and the kernels get their data pointers. On a GPU, arrays in
// host memory cost a synchronisation per read-back, about ten for each batch-norm layer in a
// training step; with them a ResNet-20 step on an H200 was issued no faster than the device ran it.
// On the CPU it is the other way round: there each of those ~40 small ops a layer and step was
// pure allocation and dispatch on the calling thread, in the serial part of a step
// (docs/measurements.md, "CPU training step"), so CPU tensors get host loops over C doubles. Both
// evaluate the same templates (tensor/batch_norm_channels.h): the same float64 operations in the
// same order.

// Note [Batch norm + ReLU]
// ResNet's blocks apply ReLU to a batch norm's output. As two ops that is two more passes over the
// data forward (ReLU reads and writes the output in place) and three backward (threshold_backward
// reads the gradient and the output and writes the masked gradient, which batch norm's backward
// then reads twice). batch_norm_relu folds ReLU into batch norm's passes: the transform writes
// y < 0 ? 0 : y, and the backward's reduction and transform mask grad_out themselves. The mask is
// ReLU's, zero where y <= 0 (threshold_backward), but y is not read: the backward recomputes it
// from the input it reads anyway and the forward's per-channel scale and shift, saved in float64
// (BatchNormRelu, tensor/kernels.h), with the very arithmetic the forward rounded it with (one
// function per backend: the CPU's affine(), one FMA where the level has FMA, and the CUDA kernels'
// affine_output). So the outputs, masks and gradients are those of relu_(batch_norm(...)) to the
// bit: tests/tensor/batch_norm_relu_test checks it at every capability level.
// With a residual (the second half of a block: relu(bn2(x) + shortcut)) the transform adds it as
// the add kernel does, saving add_'s and ReLU's forward passes; the backward then masks by the
// saved output with threshold_backward (autograd/functions/nn.cc), as relu_ did, because
// recomputing y would read the residual in both backward passes, and its gradient, the masked
// gradient itself, has to be written anyway.

namespace bnc = batch_norm_channels;

// t as C contiguous doubles on its device, or C copies of `fill` on `device` for an undefined t.
Tensor channel_values(const Tensor& t, int64_t C, double fill, Device device) {
  if (!t.defined()) return full({C}, fill, TensorOptions(kFloat64, device));
  return t.to(kFloat64).contiguous();
}

double* doubles(const Tensor& t) { return t.data_ptr<double>(); }

// The CPU's per-channel values: C doubles in host memory.
using HostValues = std::vector<double>;

// Float32 and float64 values are read and written in place (converted with static_cast, as the copy
// kernel converts); other dtypes go through Tensor::to.
HostValues host_values(const Tensor& t, int64_t C, double fill) {
  if (!t.defined()) return HostValues(C, fill);
  const Tensor c = t.contiguous();
  if (c.dtype() == kFloat32) return HostValues(c.data_ptr<float>(), c.data_ptr<float>() + C);
  const Tensor d = c.to(kFloat64);
  return HostValues(d.data_ptr<double>(), d.data_ptr<double>() + C);
}

template <typename T>
void store(const HostValues& v, T* out) {
  std::transform(v.begin(), v.end(), out, [](double x) { return static_cast<T>(x); });
}

// The values as a [C] tensor of `dtype`.
Tensor host_tensor(const HostValues& v, ScalarType dtype) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, dtype == kFloat32 ? kFloat32 : kFloat64);
  if (dtype == kFloat32) {
    store(v, t.data_ptr<float>());
    return t;
  }
  store(v, t.data_ptr<double>());
  return t.to(dtype);
}

// dst (a running statistic) = the values; written in place, so dst's version moves as with copy_.
void store_into(const Tensor& dst, const HostValues& v) {
  const bool in_place = dst.defined() && dst.is_contiguous() &&
                        (dst.dtype() == kFloat32 || dst.dtype() == kFloat64);
  if (!in_place) {
    copy_(dst, host_tensor(v, kFloat64));
    return;
  }
  if (dst.dtype() == kFloat32) {
    store(v, dst.data_ptr<float>());
  } else {
    store(v, dst.data_ptr<double>());
  }
  dst.bump_version();
}

// y[c] = f(x[c], ...) over the channels of host values.
template <typename F, typename... Inputs>
HostValues per_channel(const F& f, const HostValues& first, const Inputs&... rest) {
  HostValues out(first.size());
  for (size_t c = 0; c < first.size(); ++c) out[c] = f(first[c], rest[c]...);
  return out;
}

// The forward's output, the statistics it used, and (with ReLU and no residual) the per-channel
// scale and shift that the backward recomputes the output from (Note [Batch norm + ReLU]).
using ForwardResult = BatchNormReluForward;

// What both forward paths take besides the contiguous input and its shape.
struct ForwardArgs {
  const Tensor& weight;
  const Tensor& bias;
  const Tensor& running_mean;
  const Tensor& running_var;
  bool training;
  double momentum, eps;
  const Tensor& residual;  // contiguous, added before ReLU; undefined: none
  bool relu;
};

ForwardResult forward_on_host(const Tensor& in, const BatchNormShape& s, const ForwardArgs& a) {
  const int64_t M = s.N * s.inner;
  HostValues mean(s.C), var(s.C);
  if (a.training) {
    kernel_for(&KernelTable::batch_norm_stats, "batch_norm", {&in})(in, s, mean.data(), var.data());
    if (a.running_mean.defined()) {
      const auto average = [&](double running, double batch) {
        return bnc::running_average(running, batch, a.momentum);
      };
      const auto average_var = [&](double running, double batch) {
        return bnc::running_average(running, bnc::unbiased(batch, M), a.momentum);
      };
      store_into(a.running_mean,
                 per_channel(average, host_values(a.running_mean, s.C, 0.0), mean));
      store_into(a.running_var,
                 per_channel(average_var, host_values(a.running_var, s.C, 1.0), var));
    }
  } else {
    mean = host_values(a.running_mean, s.C, 0.0);
    var = host_values(a.running_var, s.C, 1.0);
  }
  const HostValues w = host_values(a.weight, s.C, 1.0), b = host_values(a.bias, s.C, 0.0);
  HostValues invstd(s.C), scale(s.C), shift(s.C);
  for (int64_t c = 0; c < s.C; ++c) {
    const auto n = bnc::normalisation(mean[c], var[c], w[c], b[c], a.eps);
    invstd[c] = n.invstd, scale[c] = n.scale, shift[c] = n.shift;
  }
  Tensor out = empty(in.sizes(), TensorOptions(in.dtype(), in.device()));
  kernel_for(&KernelTable::batch_norm_transform, "batch_norm", {&in})(
      out, in, s, scale.data(), shift.data(), a.residual, a.relu);
  ForwardResult r{out, host_tensor(mean, in.dtype()), host_tensor(invstd, in.dtype()), {}, {}};
  if (a.relu && !a.residual.defined()) {
    r.relu_scale = host_tensor(scale, kFloat64);
    r.relu_shift = host_tensor(shift, kFloat64);
  }
  return r;
}

ForwardResult forward_on_device(const Tensor& in, const BatchNormShape& s, const ForwardArgs& a) {
  const int64_t M = s.N * s.inner;
  const Device device = in.device();
  Tensor mean, var;
  if (a.training) {
    mean = empty({s.C}, TensorOptions(kFloat64, device));
    var = empty({s.C}, TensorOptions(kFloat64, device));
    kernel_for(&KernelTable::batch_norm_stats, "batch_norm", {&in})(in, s, doubles(mean),
                                                                    doubles(var));
    if (a.running_mean.defined()) {
      const Tensor rm = channel_values(a.running_mean, s.C, 0.0, device);
      const Tensor rv = channel_values(a.running_var, s.C, 1.0, device);
      copy_(a.running_mean, bnc::running_average(rm, mean, a.momentum));
      copy_(a.running_var, bnc::running_average(rv, bnc::unbiased(var, M), a.momentum));
    }
  } else {
    mean = channel_values(a.running_mean, s.C, 0.0, device);
    var = channel_values(a.running_var, s.C, 1.0, device);
  }
  const auto n = bnc::normalisation(mean, var, channel_values(a.weight, s.C, 1.0, device),
                                    channel_values(a.bias, s.C, 0.0, device), a.eps);
  Tensor out = empty(in.sizes(), TensorOptions(in.dtype(), device));
  kernel_for(&KernelTable::batch_norm_transform, "batch_norm", {&in})(
      out, in, s, doubles(n.scale), doubles(n.shift), a.residual, a.relu);
  // In eval, mean may be running_mean itself (float64): the saved statistic is a copy, as before.
  ForwardResult r{out, mean.to(in.dtype(), /*copy=*/true), n.invstd.to(in.dtype()), {}, {}};
  if (a.relu && !a.residual.defined()) r.relu_scale = n.scale, r.relu_shift = n.shift;
  return r;
}

ForwardResult forward(const Tensor& input, const ForwardArgs& a) {
  const BatchNormShape s =
      check_bn("batch_norm", input, a.weight, a.bias, a.running_mean, a.running_var);
  EMBER_CHECK(a.training || (a.running_mean.defined() && a.running_var.defined()),
              "batch_norm: running_mean and running_var are required in eval mode");
  const int64_t M = s.N * s.inner;
  EMBER_CHECK(!a.training || M > 1, "batch_norm: expected more than 1 value per channel when ",
              "training, got input size ", input.shape_str());
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "batch_norm: supports float32 and float64, got ", input.describe());
  if (a.residual.defined()) {
    EMBER_CHECK(a.residual.sizes() == input.sizes() && a.residual.dtype() == input.dtype() &&
                    a.residual.device() == input.device(),
                "batch_norm_relu: residual ", a.residual.describe(),
                " must have the input's shape, dtype and device (", input.describe(), ")");
  }
  NoGradGuard no_grad;  // the per-channel arithmetic is not part of any graph
  const Tensor in = input.contiguous();
  const Tensor residual = a.residual.defined() ? a.residual.contiguous() : Tensor();
  const auto on_device = input.device().is_cpu() ? forward_on_host : forward_on_device;
  return on_device(in, s, ForwardArgs{a.weight, a.bias, a.running_mean, a.running_var, a.training,
                                      a.momentum, a.eps, residual, a.relu});
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm_forward(const Tensor& input, const Tensor& weight,
                                                      const Tensor& bias, const Tensor& running_mean,
                                                      const Tensor& running_var, bool training,
                                                      double momentum, double eps) {
  const ForwardResult r = forward(input, {weight, bias, running_mean, running_var, training,
                                          momentum, eps, Tensor(), /*relu=*/false});
  return {r.out, r.mean, r.invstd};
}

BatchNormReluForward batch_norm_relu_forward(const Tensor& input, const Tensor& weight,
                                             const Tensor& bias, const Tensor& running_mean,
                                             const Tensor& running_var, bool training,
                                             double momentum, double eps,
                                             const Tensor& residual) {
  return forward(input, {weight, bias, running_mean, running_var, training, momentum, eps,
                         residual, /*relu=*/true});
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

Tensor batch_norm_relu(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training,
                       double momentum, double eps, const Tensor& residual) {
  if (auto f = autograd_kernel(&AutogradKernels::batch_norm_relu,
                               {&input, &weight, &bias, &residual})) {
    return f(input, weight, bias, running_mean, running_var, training, momentum, eps, residual);
  }
  return batch_norm_relu_forward(input, weight, bias, running_mean, running_var, training,
                                 momentum, eps, residual)
      .out;
}

namespace {

using BackwardResult = std::tuple<Tensor, Tensor, Tensor>;

// What both backward paths take: the contiguous gradient and input, their shape, the mode,
// which of grad_input, grad_weight and grad_bias to make, and the forward's scale and shift when
// a ReLU followed (undefined otherwise).
struct BackwardInputs {
  const Tensor& go;
  const Tensor& in;
  const BatchNormShape& s;
  bool training;
  std::array<bool, 3> mask;
  const Tensor& relu_scale;
  const Tensor& relu_shift;
};

BackwardResult backward_on_host(const BackwardInputs& x, const Tensor& weight, const Tensor& mean,
                                const Tensor& invstd) {
  const int64_t C = x.s.C, M = x.s.N * x.s.inner;
  const HostValues mu = host_values(mean, C, 0.0), is = host_values(invstd, C, 1.0),
                   w = host_values(weight, C, 1.0);
  HostValues relu_scale, relu_shift;
  BatchNormRelu relu;
  if (x.relu_scale.defined()) {
    relu_scale = host_values(x.relu_scale, C, 1.0), relu_shift = host_values(x.relu_shift, C, 0.0);
    relu.scale = relu_scale.data(), relu.shift = relu_shift.data();
  }
  HostValues sum_g(C), sum_gx(C);
  kernel_for(&KernelTable::batch_norm_backward_reduce, "batch_norm_backward", {&x.go, &x.in})(
      x.go, x.in, x.s, mu.data(), relu, sum_g.data(), sum_gx.data());
  Tensor grad_input;
  if (x.mask[0]) {
    HostValues a(C), b(C), d(C);
    for (int64_t c = 0; c < C; ++c) {
      const auto k = bnc::input_gradient(w[c], is[c], sum_g[c], sum_gx[c], M, x.training);
      a[c] = k.a, b[c] = k.b, d[c] = k.d;
    }
    BatchNormBackwardCoefficients k;
    k.a = a.data();
    if (x.training) k.b = b.data(), k.d = d.data(), k.mean = mu.data();
    k.relu = relu;
    grad_input = empty(x.in.sizes(), TensorOptions(x.in.dtype(), x.in.device()));
    kernel_for(&KernelTable::batch_norm_backward_transform, "batch_norm_backward",
               {&x.go, &x.in})(grad_input, x.go, x.in, x.s, k);
  }
  const auto weight_gradient = [](double g, double i) { return bnc::weight_gradient(g, i); };
  Tensor grad_weight, grad_bias;
  if (x.mask[1]) grad_weight = host_tensor(per_channel(weight_gradient, sum_gx, is), x.in.dtype());
  if (x.mask[2]) grad_bias = host_tensor(sum_g, x.in.dtype());
  return {grad_input, grad_weight, grad_bias};
}

BackwardResult backward_on_device(const BackwardInputs& x, const Tensor& weight,
                                  const Tensor& mean, const Tensor& invstd) {
  const int64_t C = x.s.C, M = x.s.N * x.s.inner;
  const Device device = x.in.device();
  const Tensor mu = channel_values(mean, C, 0.0, device);
  const Tensor is = channel_values(invstd, C, 1.0, device);
  const Tensor w = channel_values(weight, C, 1.0, device);
  const Tensor sum_g = empty({C}, TensorOptions(kFloat64, device));
  const Tensor sum_gx = empty({C}, TensorOptions(kFloat64, device));
  Tensor relu_scale, relu_shift;
  BatchNormRelu relu;
  if (x.relu_scale.defined()) {
    relu_scale = channel_values(x.relu_scale, C, 1.0, device);
    relu_shift = channel_values(x.relu_shift, C, 0.0, device);
    relu.scale = doubles(relu_scale), relu.shift = doubles(relu_shift);
  }
  kernel_for(&KernelTable::batch_norm_backward_reduce, "batch_norm_backward", {&x.go, &x.in})(
      x.go, x.in, x.s, doubles(mu), relu, doubles(sum_g), doubles(sum_gx));
  Tensor grad_input;
  if (x.mask[0]) {
    const auto coefficients = bnc::input_gradient(w, is, sum_g, sum_gx, M, x.training);
    BatchNormBackwardCoefficients k;
    k.a = doubles(coefficients.a);
    if (x.training) {
      k.b = doubles(coefficients.b), k.d = doubles(coefficients.d), k.mean = doubles(mu);
    }
    k.relu = relu;
    grad_input = empty(x.in.sizes(), TensorOptions(x.in.dtype(), device));
    kernel_for(&KernelTable::batch_norm_backward_transform, "batch_norm_backward",
               {&x.go, &x.in})(grad_input, x.go, x.in, x.s, k);
  }
  Tensor grad_weight, grad_bias;
  if (x.mask[1]) grad_weight = bnc::weight_gradient(sum_gx, is).to(x.in.dtype());
  if (x.mask[2]) grad_bias = sum_g.to(x.in.dtype());
  return {grad_input, grad_weight, grad_bias};
}

BackwardResult backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                        const Tensor& mean, const Tensor& invstd, const Tensor& relu_scale,
                        const Tensor& relu_shift, bool training, std::array<bool, 3> mask) {
  const BatchNormShape s = check_bn("batch_norm_backward", input, weight, Tensor(), mean, invstd);
  if (relu_scale.defined()) {
    check_bn("batch_norm_relu_backward", input, relu_scale, relu_shift, Tensor(), Tensor());
  }
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "batch_norm_backward: supports float32 and float64, got ", input.describe());
  const Tensor in = input.contiguous();
  const Tensor go = grad_out.contiguous().to(input.dtype());
  NoGradGuard no_grad;  // Note [Per-channel batch-norm values stay on the device]
  // dx = w*invstd * (g - mean(g) - xhat * mean(g * xhat)) in training; w*invstd * g in eval.
  const BackwardInputs x{go, in, s, training, mask, relu_scale, relu_shift};
  return input.device().is_cpu() ? backward_on_host(x, weight, mean, invstd)
                                 : backward_on_device(x, weight, mean, invstd);
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const Tensor& mean,
                                                       const Tensor& invstd, bool training,
                                                       std::array<bool, 3> mask) {
  return backward(grad_out, input, weight, mean, invstd, Tensor(), Tensor(), training, mask);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_relu_backward(const Tensor& grad_out,
                                                            const Tensor& input,
                                                            const Tensor& weight,
                                                            const BatchNormReluForward& forward,
                                                            bool training,
                                                            std::array<bool, 3> mask) {
  EMBER_CHECK(forward.relu_scale.defined() && forward.relu_shift.defined(),
              "batch_norm_relu_backward: needs the scale and shift of batch_norm_relu_forward ",
              "without a residual (with one, the gradient is masked by threshold_backward on the ",
              "output, then batch_norm_backward)");
  return backward(grad_out, input, weight, forward.mean, forward.invstd, forward.relu_scale,
                  forward.relu_shift, training, mask);
}

}  // namespace ember
