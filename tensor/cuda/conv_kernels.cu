// im2col and col2im for 2-d convolution on the device: the data movement around the GEMMs that
// conv_slots.cc runs through cuBLAS. Column matrices are [N, C * kh * kw, Ho * Wo], rows ordered
// (c, i, j) as the CPU's (tensor/cpu/im2col.h), so the same weight layout multiplies them.
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

template <typename T>
__global__ void im2col_kernel(T* cols, const T* in, ConvShape g, int64_t total) {
  const int64_t plane_out = g.Ho * g.Wo;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t ow = e % g.Wo, oh = e / g.Wo % g.Ho;
    const int64_t row = e / plane_out % (g.C * g.kh * g.kw),
                  n = e / (plane_out * g.C * g.kh * g.kw);
    const int64_t j = row % g.kw, i = row / g.kw % g.kh, c = row / (g.kw * g.kh);
    const int64_t h = oh * g.sh - g.ph + i * g.dh, w = ow * g.sw - g.pw + j * g.dw;
    cols[e] =
        (h >= 0 && h < g.H && w >= 0 && w < g.W) ? in[((n * g.C + c) * g.H + h) * g.W + w] : T(0);
  }
}

// Each input element sums the column entries that read it: a gather, so no atomics and the same
// result every run.
template <typename T>
__global__ void col2im_kernel(T* in, const T* cols, ConvShape g, int64_t total) {
  const int64_t plane_out = g.Ho * g.Wo, rows = g.C * g.kh * g.kw;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t w = e % g.W, h = e / g.W % g.H, c = e / (g.W * g.H) % g.C,
                  n = e / (g.W * g.H * g.C);
    double sum = 0;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t hs = h + g.ph - i * g.dh;
      if (hs < 0 || hs % g.sh != 0 || hs / g.sh >= g.Ho) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t ws = w + g.pw - j * g.dw;
        if (ws < 0 || ws % g.sw != 0 || ws / g.sw >= g.Wo) continue;
        const int64_t row = (c * g.kh + i) * g.kw + j;
        sum += static_cast<double>(
            cols[(n * rows + row) * plane_out + (hs / g.sh) * g.Wo + ws / g.sw]);
      }
    }
    in[e] = static_cast<T>(sum);
  }
}

template <typename T>
int run(bool to_columns, void* dst, const void* src, const ConvShape& g, cudaStream_t stream) {
  if (to_columns) {
    const int64_t total = g.N * g.C * g.kh * g.kw * g.Ho * g.Wo;
    if (total == 0) return 0;
    const auto kernel = im2col_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(dst),
                 static_cast<const T*>(src), g, total);
  } else {
    const int64_t total = g.N * g.C * g.H * g.W;
    if (total == 0) return 0;
    const auto kernel = col2im_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(dst),
                 static_cast<const T*>(src), g, total);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_im2col(DType dtype, void* cols, const void* in, const ConvShape& g,
                  cudaStream_t stream) {
  if (dtype == DType::Float32) return run<float>(true, cols, in, g, stream);
  if (dtype == DType::Float64) return run<double>(true, cols, in, g, stream);
  return static_cast<int>(cudaErrorInvalidValue);
}

int launch_col2im(DType dtype, void* in, const void* cols, const ConvShape& g,
                  cudaStream_t stream) {
  if (dtype == DType::Float32) return run<float>(false, in, cols, g, stream);
  if (dtype == DType::Float64) return run<double>(false, in, cols, g, stream);
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace ember::cuda
