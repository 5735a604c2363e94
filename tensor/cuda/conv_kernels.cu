// im2col and col2im for 2-d convolution on the device: the data movement around the GEMMs that
// conv_slots.cc runs through cuBLAS. Column matrices are [N, C * kh * kw, Ho * Wo], rows ordered
// (c, i, j) as the CPU's (tensor/cpu/im2col.h), so the same weight layout multiplies them.
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

// Index is int32_t when every offset fits (fits_int32), else int64_t: 64-bit division costs
// several times the instructions of 32-bit on a GPU, and these kernels are mostly index arithmetic.

// One thread per (n, c, oh, ow) writes that position's kh * kw column entries: the divisions are
// done once per position rather than once per entry, and neighbouring threads (neighbouring ow)
// still write neighbouring addresses.
template <typename T, typename Index>
__global__ void im2col_kernel(T* cols, const T* in, ConvShape g, Index total) {
  const Index H = g.H, W = g.W, kh = g.kh, kw = g.kw, Ho = g.Ho, Wo = g.Wo;
  const Index sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
  const Index plane_out = Ho * Wo;
  for (Index e = global_thread_index(); e < total; e += grid_stride()) {
    const Index ow = e % Wo, oh = e / Wo % Ho, nc = e / plane_out;  // nc = n * C + c
    const Index h0 = oh * sh - ph, w0 = ow * sw - pw;
    const T* plane = in + nc * H * W;
    T* out = cols + nc * kh * kw * plane_out + oh * Wo + ow;  // rows (c, i, j) of image n
    for (Index i = 0; i < kh; ++i) {
      const Index h = h0 + i * dh;
      const bool row_inside = h >= 0 && h < H;
      for (Index j = 0; j < kw; ++j, out += plane_out) {
        const Index w = w0 + j * dw;
        *out = (row_inside && w >= 0 && w < W) ? plane[h * W + w] : T(0);
      }
    }
  }
}

// Each input element sums the column entries that read it: a gather, so no atomics and the same
// result every run.
template <typename T, typename Index>
__global__ void col2im_kernel(T* in, const T* cols, ConvShape g, Index total) {
  const Index H = g.H, W = g.W, kh = g.kh, kw = g.kw, Ho = g.Ho, Wo = g.Wo;
  const Index sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
  const Index plane_out = Ho * Wo;
  for (Index e = global_thread_index(); e < total; e += grid_stride()) {
    const Index w = e % W, h = e / W % H, nc = e / (W * H);  // nc = n * C + c
    const T* rows = cols + nc * kh * kw * plane_out;         // rows (c, i, j) of image n
    double sum = 0;
    for (Index i = 0; i < kh; ++i) {
      const Index hs = h + ph - i * dh;
      if (hs < 0 || hs % sh != 0 || hs / sh >= Ho) continue;
      for (Index j = 0; j < kw; ++j) {
        const Index ws = w + pw - j * dw;
        if (ws < 0 || ws % sw != 0 || ws / sw >= Wo) continue;
        sum += static_cast<double>(rows[(i * kw + j) * plane_out + (hs / sh) * Wo + ws / sw]);
      }
    }
    in[e] = static_cast<T>(sum);
  }
}

// Whether every offset into the input and the columns, and every loop index past them by a grid
// stride, fits in an int32_t.
bool fits_int32(const ConvShape& g) {
  const int64_t cols = g.N * g.C * g.kh * g.kw * g.Ho * g.Wo, input = g.N * g.C * g.H * g.W;
  const int64_t limit = (int64_t{1} << 31) - kMaxBlocks * kThreadsPerBlock;
  return cols < limit && input < limit && g.H + g.ph < limit && g.W + g.pw < limit;
}

template <typename T, typename Index>
void launch(bool to_columns, void* dst, const void* src, const ConvShape& g, cudaStream_t stream) {
  if (to_columns) {
    const int64_t total = g.N * g.C * g.Ho * g.Wo;
    if (total == 0) return;
    const auto kernel = im2col_kernel<T, Index>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(dst),
                 static_cast<const T*>(src), g, static_cast<Index>(total));
  } else {
    const int64_t total = g.N * g.C * g.H * g.W;
    if (total == 0) return;
    const auto kernel = col2im_kernel<T, Index>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(dst),
                 static_cast<const T*>(src), g, static_cast<Index>(total));
  }
}

template <typename T>
int run(bool to_columns, void* dst, const void* src, const ConvShape& g, cudaStream_t stream) {
  if (fits_int32(g)) {
    launch<T, int32_t>(to_columns, dst, src, g, stream);
  } else {
    launch<T, int64_t>(to_columns, dst, src, g, stream);
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
