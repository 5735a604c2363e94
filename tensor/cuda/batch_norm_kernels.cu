// Batch-norm kernels over dense [N, C, inner] float32/float64 data: per-channel statistics (one
// block per channel, two passes in double: the mean, then the centred squares), the fused
// scale-and-shift, and the closed-form backward's per-channel sums and transform. Per-channel
// arrays are device doubles (batch_norm_slots.cc moves them to and from the host contract).
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

constexpr int kChannelThreads = 256;

// Sums `value(n, i)` over one channel's N * inner elements with the whole block; every thread
// gets the total.
template <typename F>
__device__ double block_channel_sum(const BatchNormDims& s, F value, double* scratch) {
  double acc = 0;
  for (int64_t e = threadIdx.x; e < s.N * s.inner; e += blockDim.x)
    acc += value(e / s.inner, e % s.inner);
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();  // everyone has read scratch[0] before it is reused
  return total;
}

template <typename T>
struct ChannelValue {
  const T* x;
  const T* g;  // null: x itself
  BatchNormDims s;
  int64_t c;
  double center;
  bool squared;
  __device__ double operator()(int64_t n, int64_t i) const {
    const int64_t at = (n * s.C + c) * s.inner + i;
    const double centred = static_cast<double>(x[at]) - center;
    if (g != nullptr) {
      const double gv = static_cast<double>(g[at]);
      return squared ? gv * centred : gv;
    }
    return squared ? centred * centred : centred;
  }
};

template <typename T>
__global__ void stats_kernel(const T* x, BatchNormDims s, double* mean, double* var) {
  __shared__ double scratch[kChannelThreads];
  const double M = static_cast<double>(s.N * s.inner);
  for (int64_t c = blockIdx.x; c < s.C; c += gridDim.x) {
    const double m =
        block_channel_sum(s, ChannelValue<T>{x, nullptr, s, c, 0.0, false}, scratch) / M;
    const double v = block_channel_sum(s, ChannelValue<T>{x, nullptr, s, c, m, true}, scratch) / M;
    if (threadIdx.x == 0) {
      mean[c] = m;
      var[c] = v;
    }
  }
}

template <typename T>
__global__ void backward_reduce_kernel(const T* g, const T* x, BatchNormDims s, const double* mean,
                                       double* sum_g, double* sum_gx) {
  __shared__ double scratch[kChannelThreads];
  for (int64_t c = blockIdx.x; c < s.C; c += gridDim.x) {
    const double a = block_channel_sum(s, ChannelValue<T>{x, g, s, c, mean[c], false}, scratch);
    const double b = block_channel_sum(s, ChannelValue<T>{x, g, s, c, mean[c], true}, scratch);
    if (threadIdx.x == 0) {
      sum_g[c] = a;
      sum_gx[c] = b;
    }
  }
}

template <typename T>
__global__ void transform_kernel(T* out, const T* x, BatchNormDims s, const double* scale,
                                 const double* shift) {
  const int64_t total = s.N * s.C * s.inner;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t c = e / s.inner % s.C;
    out[e] = static_cast<T>(static_cast<double>(x[e]) * scale[c] + shift[c]);
  }
}

// grad_input = a[c] * g - b[c] - d[c] * (x - mean[c]); just a[c] * g when b is null (eval).
template <typename T>
__global__ void backward_transform_kernel(T* gi, const T* g, const T* x, BatchNormDims s,
                                          const double* a, const double* b, const double* d,
                                          const double* mean) {
  const int64_t total = s.N * s.C * s.inner;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t c = e / s.inner % s.C;
    double v = a[c] * static_cast<double>(g[e]);
    if (b != nullptr) v -= b[c] + d[c] * (static_cast<double>(x[e]) - mean[c]);
    gi[e] = static_cast<T>(v);
  }
}

unsigned channel_blocks(int64_t C) {
  return static_cast<unsigned>(C < kMaxBlocks ? (C > 0 ? C : 1) : kMaxBlocks);
}

template <typename Body>
int floating(DType dtype, Body body) {
  if (dtype == DType::Float32) return body(float{});
  if (dtype == DType::Float64) return body(double{});
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace

int launch_batch_norm_stats(DType dtype, const void* x, const BatchNormDims& s, double* mean,
                            double* var, cudaStream_t stream) {
  if (s.C == 0) return 0;
  return floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = stats_kernel<T>;
    EMBER_LAUNCH(kernel, channel_blocks(s.C), kChannelThreads, 0, stream, static_cast<const T*>(x),
                 s, mean, var);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_batch_norm_backward_reduce(DType dtype, const void* g, const void* x,
                                      const BatchNormDims& s, const double* mean, double* sum_g,
                                      double* sum_gx, cudaStream_t stream) {
  if (s.C == 0) return 0;
  return floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = backward_reduce_kernel<T>;
    EMBER_LAUNCH(kernel, channel_blocks(s.C), kChannelThreads, 0, stream, static_cast<const T*>(g),
                 static_cast<const T*>(x), s, mean, sum_g, sum_gx);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_batch_norm_transform(DType dtype, void* out, const void* x, const BatchNormDims& s,
                                const double* scale, const double* shift, cudaStream_t stream) {
  const int64_t total = s.N * s.C * s.inner;
  if (total == 0) return 0;
  return floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = transform_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(out),
                 static_cast<const T*>(x), s, scale, shift);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_batch_norm_backward_transform(DType dtype, void* gi, const void* g, const void* x,
                                         const BatchNormDims& s, const double* a, const double* b,
                                         const double* d, const double* mean, cudaStream_t stream) {
  const int64_t total = s.N * s.C * s.inner;
  if (total == 0) return 0;
  return floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = backward_transform_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(gi),
                 static_cast<const T*>(g), static_cast<const T*>(x), s, a, b, d, mean);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
