// fused_sgd_'s kernel: one pass over a parameter, rounding as SGD's tensor ops do on this device
// (Note [Fused SGD], tensor/fused_sgd.cc).
#include <cmath>

#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

// x + a * y as the binary kernel computes add(x, y, alpha = a): nvcc contracts it into a fused
// multiply-add on a GPU; the simulator's host compiler does so only where the host level has FMA.
__device__ __forceinline__ float multiply_add(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double multiply_add(double a, double b, double c) {
  return fma(a, b, c);
}

template <typename T>
__device__ __forceinline__ T add_scaled(T x, T a, T y) {
#if defined(__CUDA_ARCH__) || defined(__FMA__)
  return multiply_add(a, y, x);
#else
  return x + a * y;
#endif
}

template <typename T>
__global__ void fused_sgd_kernel(T* param, const T* grad, T* buf, int64_t n, SgdArgs h) {
  const T weight_decay = T(h.weight_decay), momentum = T(h.momentum);
  const T one_minus_dampening = T(1 - h.dampening), minus_lr = T(-h.lr);
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    T g = grad[i];
    if (h.weight_decay != 0) g = add_scaled(g, weight_decay, param[i]);
    if (h.momentum != 0) {
      // Otherwise buf.mul_(momentum), rounded to T, then add_(g, 1 - dampening).
      const T b = h.first_step ? g : add_scaled(T(buf[i] * momentum), one_minus_dampening, g);
      buf[i] = b;
      g = h.nesterov ? add_scaled(g, momentum, b) : b;
    }
    param[i] = add_scaled(param[i], minus_lr, g);
  }
}

}  // namespace

int launch_fused_sgd(DType dtype, void* param, const void* grad, void* buf, int64_t n,
                     const SgdArgs& args, cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_float_and_double(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = fused_sgd_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<T*>(param),
                 static_cast<const T*>(grad), static_cast<T*>(buf), n, args);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
