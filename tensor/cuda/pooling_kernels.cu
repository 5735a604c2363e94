// 2-d pooling on the device, one thread per output element for the forward passes and one per
// input element for the backward ones (each input gathers the outputs whose window holds it, so no
// atomics and the same result every run). Same rules as tensor/cpu/pooling_kernels.cc: max takes
// NaN first, then the first maximum; average pooling counts padding; adaptive windows are
// PyTorch's.
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

template <typename T>
__global__ void max_pool_kernel(T* out, int64_t* indices, const T* in, PoolShape g) {
  const int64_t total = g.planes * g.Ho * g.Wo;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t ow = e % g.Wo, oh = e / g.Wo % g.Ho, p = e / (g.Wo * g.Ho);
    const T* plane = in + p * g.H * g.W;
    T best = T(0);
    int64_t best_i = -1;
    bool done = false;
    for (int64_t i = 0; i < g.kh && !done; ++i) {
      const int64_t ih = oh * g.sh - g.ph + i;
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t iw = ow * g.sw - g.pw + j;
        if (iw < 0 || iw >= g.W) continue;
        const T v = plane[ih * g.W + iw];
        if (best_i < 0 || v > best || v != v) {
          best = v;
          best_i = ih * g.W + iw;
          if (v != v) {
            done = true;
            break;
          }
        }
      }
    }
    out[e] = best;
    indices[e] = best_i;
  }
}

// The count_include_pad divisor and the clipped window of output (oh, ow).
struct AvgWindow {
  int64_t h0, h1, w0, w1, count;
};
__device__ AvgWindow avg_window(const PoolShape& g, int64_t oh, int64_t ow) {
  AvgWindow a;
  a.h0 = oh * g.sh - g.ph;
  a.w0 = ow * g.sw - g.pw;
  a.h1 = min64(a.h0 + g.kh, g.H + g.ph);
  a.w1 = min64(a.w0 + g.kw, g.W + g.pw);
  a.count = (a.h1 - a.h0) * (a.w1 - a.w0);
  a.h0 = max64(a.h0, 0);
  a.w0 = max64(a.w0, 0);
  a.h1 = min64(a.h1, g.H);
  a.w1 = min64(a.w1, g.W);
  return a;
}

template <typename T>
__global__ void avg_pool_kernel(T* out, const T* in, PoolShape g) {
  const int64_t total = g.planes * g.Ho * g.Wo;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t ow = e % g.Wo, oh = e / g.Wo % g.Ho, p = e / (g.Wo * g.Ho);
    const AvgWindow a = avg_window(g, oh, ow);
    double s = 0;
    for (int64_t h = a.h0; h < a.h1; ++h) {
      for (int64_t w = a.w0; w < a.w1; ++w) {
        s += static_cast<double>(in[(p * g.H + h) * g.W + w]);
      }
    }
    out[e] = static_cast<T>(s / static_cast<double>(a.count));
  }
}

template <typename T>
__global__ void avg_pool_backward_kernel(T* grad_in, const T* grad_out, PoolShape g) {
  const int64_t total = g.planes * g.H * g.W;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t w = e % g.W, h = e / g.W % g.H, p = e / (g.W * g.H);
    // Outputs whose window [o * s - pad, o * s - pad + k) holds h (and w).
    // (The lower bounds may be loose for negative numerators; the window test below is exact.)
    const int64_t oh_lo = max64(0, (h + g.ph - g.kh + g.sh) / g.sh);
    const int64_t oh_hi = min64(g.Ho - 1, (h + g.ph) / g.sh);
    const int64_t ow_lo = max64(0, (w + g.pw - g.kw + g.sw) / g.sw);
    const int64_t ow_hi = min64(g.Wo - 1, (w + g.pw) / g.sw);
    double s = 0;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const AvgWindow a = avg_window(g, oh, ow);
        if (h < a.h0 || h >= a.h1 || w < a.w0 || w >= a.w1) continue;
        s += static_cast<double>(grad_out[(p * g.Ho + oh) * g.Wo + ow]) /
             static_cast<double>(a.count);
      }
    }
    grad_in[e] = static_cast<T>(s);
  }
}

__device__ __forceinline__ int64_t start_index(int64_t o, int64_t out, int64_t in) {
  return (o * in) / out;
}
__device__ __forceinline__ int64_t end_index(int64_t o, int64_t out, int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename T>
__global__ void adaptive_avg_pool_kernel(T* out, const T* in, PoolShape g) {
  const int64_t total = g.planes * g.Ho * g.Wo;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t ow = e % g.Wo, oh = e / g.Wo % g.Ho, p = e / (g.Wo * g.Ho);
    const int64_t h0 = start_index(oh, g.Ho, g.H), h1 = end_index(oh, g.Ho, g.H);
    const int64_t w0 = start_index(ow, g.Wo, g.W), w1 = end_index(ow, g.Wo, g.W);
    double s = 0;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) s += static_cast<double>(in[(p * g.H + h) * g.W + w]);
    }
    out[e] = static_cast<T>(s / static_cast<double>((h1 - h0) * (w1 - w0)));
  }
}

template <typename T>
__global__ void adaptive_avg_pool_backward_kernel(T* grad_in, const T* grad_out, PoolShape g) {
  const int64_t total = g.planes * g.H * g.W;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t w = e % g.W, h = e / g.W % g.H, p = e / (g.W * g.H);
    double s = 0;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = start_index(oh, g.Ho, g.H), h1 = end_index(oh, g.Ho, g.H);
      if (h < h0 || h >= h1) continue;
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = start_index(ow, g.Wo, g.W), w1 = end_index(ow, g.Wo, g.W);
        if (w < w0 || w >= w1) continue;
        s += static_cast<double>(grad_out[(p * g.Ho + oh) * g.Wo + ow]) /
             static_cast<double>((h1 - h0) * (w1 - w0));
      }
    }
    grad_in[e] = static_cast<T>(s);
  }
}

}  // namespace

int launch_pool(PoolKind kind, DType dtype, void* out, int64_t* indices, const void* in,
                const PoolShape& g, cudaStream_t stream) {
  const bool backward = kind == PoolKind::kAvgBackward || kind == PoolKind::kAdaptiveAvgBackward;
  const int64_t total = backward ? g.planes * g.H * g.W : g.planes * g.Ho * g.Wo;
  if (total == 0) return 0;
  return dispatch_float_and_double(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    const T* i = static_cast<const T*>(in);
    switch (kind) {
      case PoolKind::kMax: {
        const auto kernel = max_pool_kernel<T>;
        EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, o, indices, i, g);
        break;
      }
      case PoolKind::kAvg: {
        const auto kernel = avg_pool_kernel<T>;
        EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, o, i, g);
        break;
      }
      case PoolKind::kAvgBackward: {
        const auto kernel = avg_pool_backward_kernel<T>;
        EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, o, i, g);
        break;
      }
      case PoolKind::kAdaptiveAvg: {
        const auto kernel = adaptive_avg_pool_kernel<T>;
        EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, o, i, g);
        break;
      }
      case PoolKind::kAdaptiveAvgBackward: {
        const auto kernel = adaptive_avg_pool_backward_kernel<T>;
        EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, o, i, g);
        break;
      }
    }
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
