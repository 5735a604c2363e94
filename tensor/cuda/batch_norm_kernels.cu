// Batch-norm kernels over dense [N, C, inner] float32/float64 data: per-channel statistics (two
// passes in double: the mean, then the centred squares), the fused scale-and-shift, and the
// closed-form backward's per-channel sums and transform. Per-channel arrays are device doubles
// (Note [Per-channel batch-norm values stay on the device], tensor/batch_norm.cc).
//
// Note [Batch-norm sums in parts]
// A channel's N * inner elements are summed by `parts` blocks, each over a run of whole images
// (batch_norm_parts), into a workspace of partial sums that one thread per channel then adds in
// part order. One block per channel left most of a GPU idle (16 to 64 blocks for ResNet-20) and was
// half of its step on an H200. `parts` depends on the shape alone, so the order of every sum -- and
// so its bits -- is the same on any GPU and every run.
#include <algorithm>

#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

constexpr int kChannelThreads = 256;

// What a block sums over its elements: x, (x - center)^2, or g and g * (x - center) at once.
enum class ChannelSum : int { kValues, kCentredSquares, kGradients };

struct TwoSums {
  double a = 0, b = 0;
};

// The forward's output before ReLU, as transform_kernel rounds it; batch_norm_relu's backward
// recomputes it for ReLU's mask (Note [Batch norm + ReLU], tensor/batch_norm.cc).
template <typename T>
__device__ T affine_output(T x, double scale, double shift) {
  return static_cast<T>(static_cast<double>(x) * scale + shift);
}

// ReLU's backward on the output (threshold_backward): g, or 0 where channel c's output y <= 0;
// g itself when relu_scale is null.
template <typename T>
__device__ T relu_masked(T g, T x, int64_t c, const double* relu_scale, const double* relu_shift) {
  if (relu_scale == nullptr) return g;
  return affine_output(x, relu_scale[c], relu_shift[c]) <= T(0) ? T(0) : g;
}

// The block's two sums, left in scratch[0] and scratch[kChannelThreads] for thread 0.
__device__ void block_reduce(TwoSums acc, double* scratch) {
  scratch[threadIdx.x] = acc.a;
  scratch[kChannelThreads + threadIdx.x] = acc.b;
  __syncthreads();
  for (int half = kChannelThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      scratch[threadIdx.x] += scratch[threadIdx.x + half];
      scratch[kChannelThreads + threadIdx.x] += scratch[kChannelThreads + threadIdx.x + half];
    }
    __syncthreads();
  }
}

// Block b sums channel b / parts over images [p * N / parts, (p + 1) * N / parts), p = b % parts,
// into partial_a[b] (and partial_b[b] for kGradients); Index: with_index_type (device_code.h).
template <typename T, typename Index>
__global__ void partial_sums_kernel(const T* x, const T* g, BatchNormDims s, int64_t parts,
                                    ChannelSum what, const double* center, const double* relu_scale,
                                    const double* relu_shift, double* partial_a,
                                    double* partial_b) {
  EMBER_SHARED(double, scratch, 2 * kChannelThreads);
  const int64_t c = blockIdx.x / parts, p = blockIdx.x % parts;
  const int64_t n0 = p * s.N / parts, n1 = (p + 1) * s.N / parts;
  const Index inner = static_cast<Index>(s.inner), count = static_cast<Index>((n1 - n0) * s.inner);
  const double mu = center != nullptr ? center[c] : 0.0;
  TwoSums acc;
  for (Index e = threadIdx.x; e < count; e += kChannelThreads) {
    const int64_t at = ((n0 + e / inner) * s.C + c) * s.inner + e % inner;
    const double centred = static_cast<double>(x[at]) - mu;
    if (what == ChannelSum::kValues) {
      acc.a += centred;
    } else if (what == ChannelSum::kCentredSquares) {
      acc.a += centred * centred;
    } else {
      const double gv = static_cast<double>(relu_masked(g[at], x[at], c, relu_scale, relu_shift));
      acc.a += gv;
      acc.b += gv * centred;
    }
  }
  block_reduce(acc, scratch);
  if (threadIdx.x == 0) {
    partial_a[blockIdx.x] = scratch[0];
    if (partial_b != nullptr) partial_b[blockIdx.x] = scratch[kChannelThreads];
  }
}

// out_a[c] = scale * the sum of channel c's parts, in part order (out_b likewise when given).
__global__ void finish_sums_kernel(const double* partial_a, const double* partial_b, int64_t C,
                                   int64_t parts, double scale, double* out_a, double* out_b) {
  for (int64_t c = global_thread_index(); c < C; c += grid_stride()) {
    double a = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) {
      a += partial_a[c * parts + p];
      if (partial_b != nullptr) b += partial_b[c * parts + p];
    }
    out_a[c] = a * scale;
    if (out_b != nullptr) out_b[c] = b * scale;
  }
}

// The number of parts each channel is summed in (Note [Batch-norm sums in parts]).
int64_t batch_norm_parts(const BatchNormDims& s) {
  // About 1024 blocks in all (several per multiprocessor of any current GPU), each summing at
  // least ~4096 elements, and never more parts than images.
  const int64_t by_blocks = (1024 + s.C - 1) / std::max<int64_t>(s.C, 1);
  const int64_t by_work = std::max<int64_t>(1, s.N * s.inner / 4096);
  return std::max<int64_t>(1, std::min({by_blocks, by_work, s.N}));
}

// One of `what` over every channel into out_a (and out_b), times scale.
template <typename T>
int channel_sums(const T* x, const T* g, const BatchNormDims& s, ChannelSum what,
                 const double* center, const double* relu_scale, const double* relu_shift,
                 double scale, double* workspace, double* out_a, double* out_b,
                 cudaStream_t stream) {
  const int64_t parts = batch_norm_parts(s), blocks = s.C * parts;
  double* partial_a = workspace;
  double* partial_b = out_b != nullptr ? workspace + blocks : nullptr;
  const int64_t most = (s.N + parts - 1) / parts * s.inner;  // the most elements one block sums
  with_index_type(most < (int64_t{1} << 31) - kChannelThreads, [&](auto index) {
    const auto kernel = partial_sums_kernel<T, decltype(index)>;
    EMBER_LAUNCH(kernel, static_cast<unsigned>(blocks), kChannelThreads, 0, stream, x, g, s, parts,
                 what, center, relu_scale, relu_shift, partial_a, partial_b);
  });
  EMBER_LAUNCH(finish_sums_kernel, blocks_for(s.C), kThreadsPerBlock, 0, stream, partial_a,
               partial_b, s.C, parts, scale, out_a, out_b);
  return static_cast<int>(cudaGetLastError());
}

// out = x * scale + shift, plus residual where it is not null, then ReLU (y < 0 ? 0 : y,
// keeping NaN) where relu is set.
template <typename T>
__global__ void transform_kernel(T* out, const T* x, BatchNormDims s, const double* scale,
                                 const double* shift, const T* residual, bool relu) {
  const int64_t total = s.N * s.C * s.inner;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t c = e / s.inner % s.C;
    T y = affine_output(x[e], scale[c], shift[c]);
    if (residual != nullptr) y = y + residual[e];
    out[e] = relu && y < T(0) ? T(0) : y;
  }
}

// grad_input = a[c] * g - b[c] - d[c] * (x - mean[c]); just a[c] * g when b is null (eval); g
// masked by ReLU's backward first where relu_scale is set.
template <typename T>
__global__ void backward_transform_kernel(T* gi, const T* g, const T* x, BatchNormDims s,
                                          const double* a, const double* b, const double* d,
                                          const double* mean, const double* relu_scale,
                                          const double* relu_shift) {
  const int64_t total = s.N * s.C * s.inner;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t c = e / s.inner % s.C;
    double v = a[c] * static_cast<double>(relu_masked(g[e], x[e], c, relu_scale, relu_shift));
    if (b != nullptr) v -= b[c] + d[c] * (static_cast<double>(x[e]) - mean[c]);
    gi[e] = static_cast<T>(v);
  }
}

}  // namespace

int64_t batch_norm_workspace_doubles(const BatchNormDims& s) {
  return 2 * s.C * batch_norm_parts(s);
}

int launch_batch_norm_stats(DType dtype, const void* x, const BatchNormDims& s, double* workspace,
                            double* mean, double* var, cudaStream_t stream) {
  if (s.C == 0) return 0;
  const double inv_count = 1.0 / static_cast<double>(s.N * s.inner);
  return dispatch_float_and_double(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(x);
    const int rc = channel_sums<T>(data, nullptr, s, ChannelSum::kValues, nullptr, nullptr,
                                   nullptr, inv_count, workspace, mean, nullptr, stream);
    if (rc != 0) return rc;
    return channel_sums<T>(data, nullptr, s, ChannelSum::kCentredSquares, mean, nullptr, nullptr,
                           inv_count, workspace, var, nullptr, stream);
  });
}

int launch_batch_norm_backward_reduce(DType dtype, const void* g, const void* x,
                                      const BatchNormDims& s, const double* mean,
                                      const double* relu_scale, const double* relu_shift,
                                      double* workspace, double* sum_g, double* sum_gx,
                                      cudaStream_t stream) {
  if (s.C == 0) return 0;
  return dispatch_float_and_double(dtype, [&](auto tag) {
    using T = decltype(tag);
    return channel_sums<T>(static_cast<const T*>(x), static_cast<const T*>(g), s,
                           ChannelSum::kGradients, mean, relu_scale, relu_shift, 1.0, workspace,
                           sum_g, sum_gx, stream);
  });
}

int launch_batch_norm_transform(DType dtype, void* out, const void* x, const BatchNormDims& s,
                                const double* scale, const double* shift, const void* residual,
                                bool relu, cudaStream_t stream) {
  const int64_t total = s.N * s.C * s.inner;
  if (total == 0) return 0;
  return dispatch_float_and_double(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = transform_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(out),
                 static_cast<const T*>(x), s, scale, shift, static_cast<const T*>(residual),
                 relu);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_batch_norm_backward_transform(DType dtype, void* gi, const void* g, const void* x,
                                         const BatchNormDims& s, const double* a, const double* b,
                                         const double* d, const double* mean,
                                         const double* relu_scale, const double* relu_shift,
                                         cudaStream_t stream) {
  const int64_t total = s.N * s.C * s.inner;
  if (total == 0) return 0;
  return dispatch_float_and_double(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = backward_transform_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(gi),
                 static_cast<const T*>(g), static_cast<const T*>(x), s, a, b, d, mean, relu_scale,
                 relu_shift);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
