// Batch normalisation's per-channel arithmetic, written once for two value types (Note [Per-channel
// batch-norm values stay on the device], tensor/batch_norm.cc): V is a double, for one channel in a
// host loop (CPU tensors), or a [C] float64 Tensor, for all channels as device ops (GPU tensors).
// Each function is the same float64 operations in the same order for both, so the two agree to the
// bit (tests/tensor/batch_norm_channels_test.cc); this file is built for baseline x86-64, which has
// no fused multiply-add for the compiler to contract a product and a sum into.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace ember::batch_norm_channels {

inline double rsqrt_of(double x) { return 1.0 / std::sqrt(x); }
inline Tensor rsqrt_of(const Tensor& x) { return rsqrt(x); }

// running = (1 - momentum) * running + momentum * batch statistic.
template <typename V>
V running_average(const V& running, const V& batch, double momentum) {
  return running * (1 - momentum) + batch * momentum;
}

// The biased variance of M values, made unbiased for the running variance, as PyTorch keeps it.
template <typename V>
V unbiased(const V& var, int64_t M) {
  return var * static_cast<double>(M) / static_cast<double>(M - 1);
}

// out = scale * x + shift normalises x by (mean, var) and applies the affine (w, b).
template <typename V>
struct Normalisation {
  V invstd, scale, shift;
};
template <typename V>
Normalisation<V> normalisation(const V& mean, const V& var, const V& w, const V& b, double eps) {
  V invstd = rsqrt_of(var + eps);
  V scale = w * invstd;
  V shift = b - mean * w * invstd;
  return {invstd, scale, shift};
}

// grad_input = a * g - b - d * (x - mean) in training (BatchNormBackwardCoefficients, kernels.h),
// from the sums of g and g * (x - mean) over the M values of a channel; a * g in eval.
template <typename V>
struct InputGradient {
  V a, b, d;
};
template <typename V>
InputGradient<V> input_gradient(const V& w, const V& invstd, const V& sum_g, const V& sum_gx,
                                int64_t M, bool training) {
  const V a = w * invstd;
  if (!training) return {a, V(), V()};
  const double m = static_cast<double>(M);
  return {a, a * sum_g / m, a * sum_gx * invstd * invstd / m};
}

// d loss / d weight; d loss / d bias is sum_g itself.
template <typename V>
V weight_gradient(const V& sum_gx, const V& invstd) {
  return sum_gx * invstd;
}

}  // namespace ember::batch_norm_channels
