// im2col and col2im for 2-d convolution on the device: the data movement around the GEMMs that
// conv_slots.cc runs through cuBLAS. Column matrices are [N, C * kh * kw, Ho * Wo], rows ordered
// (c, i, j) as the CPU's (tensor/cpu/im2col.h), so the same weight layout multiplies them.
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

// ConvShape's planes and window in the kernels' index type (with_index_type, device_code.h):
// int32_t when every offset fits (fits_int32).
template <typename Index>
struct Window {
  Index H, W, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw;
};

template <typename Index>
Window<Index> window_of(const ConvShape& g) {
  const auto i = [](int64_t v) { return static_cast<Index>(v); };
  return {i(g.H), i(g.W), i(g.kh), i(g.kw), i(g.Ho), i(g.Wo), i(g.sh), i(g.sw), i(g.ph), i(g.pw),
          i(g.dh), i(g.dw)};
}

// One thread per (n, c, oh, ow) writes that position's kh * kw column entries: the divisions are
// done once per position rather than once per entry, and neighbouring threads (neighbouring ow)
// still write neighbouring addresses.
template <typename T, typename Index>
__global__ void im2col_kernel(T* cols, const T* in, Window<Index> g, Index total) {
  const Index plane_out = g.Ho * g.Wo;
  for (Index e = global_thread_index(); e < total; e += grid_stride()) {
    const Index ow = e % g.Wo, oh = e / g.Wo % g.Ho, nc = e / plane_out;  // nc = n * C + c
    const Index h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    const T* plane = in + nc * g.H * g.W;
    T* out = cols + nc * g.kh * g.kw * plane_out + oh * g.Wo + ow;  // rows (c, i, j) of image n
    for (Index i = 0; i < g.kh; ++i) {
      const Index h = h0 + i * g.dh;
      const bool row_inside = h >= 0 && h < g.H;
      for (Index j = 0; j < g.kw; ++j, out += plane_out) {
        const Index w = w0 + j * g.dw;
        *out = (row_inside && w >= 0 && w < g.W) ? plane[h * g.W + w] : T(0);
      }
    }
  }
}

// Each input element sums the column entries that read it: a gather, so no atomics and the same
// result every run.
template <typename T, typename Index>
__global__ void col2im_kernel(T* in, const T* cols, Window<Index> g, Index total) {
  const Index plane_out = g.Ho * g.Wo;
  for (Index e = global_thread_index(); e < total; e += grid_stride()) {
    const Index w = e % g.W, h = e / g.W % g.H, nc = e / (g.W * g.H);  // nc = n * C + c
    const T* rows = cols + nc * g.kh * g.kw * plane_out;  // rows (c, i, j) of image n
    double sum = 0;
    for (Index i = 0; i < g.kh; ++i) {
      const Index hs = h + g.ph - i * g.dh;
      if (hs < 0 || hs % g.sh != 0 || hs / g.sh >= g.Ho) continue;
      for (Index j = 0; j < g.kw; ++j) {
        const Index ws = w + g.pw - j * g.dw;
        if (ws < 0 || ws % g.sw != 0 || ws / g.sw >= g.Wo) continue;
        sum += static_cast<double>(
            rows[(i * g.kw + j) * plane_out + (hs / g.sh) * g.Wo + ws / g.sw]);
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

template <typename T>
int run(bool to_columns, void* dst, const void* src, const ConvShape& g, cudaStream_t stream) {
  const int64_t total = to_columns ? g.N * g.C * g.Ho * g.Wo : g.N * g.C * g.H * g.W;
  if (total == 0) return 0;
  with_index_type(fits_int32(g), [&](auto index) {
    using Index = decltype(index);
    if (to_columns) {
      const auto kernel = im2col_kernel<T, Index>;
      EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(dst),
                   static_cast<const T*>(src), window_of<Index>(g), static_cast<Index>(total));
    } else {
      const auto kernel = col2im_kernel<T, Index>;
      EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(dst),
                   static_cast<const T*>(src), window_of<Index>(g), static_cast<Index>(total));
    }
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_im2col(DType dtype, void* cols, const void* in, const ConvShape& g,
                  cudaStream_t stream) {
  if (dtype == DType::kFloat32) return run<float>(true, cols, in, g, stream);
  if (dtype == DType::kFloat64) return run<double>(true, cols, in, g, stream);
  return static_cast<int>(cudaErrorInvalidValue);
}

int launch_col2im(DType dtype, void* in, const void* cols, const ConvShape& g,
                  cudaStream_t stream) {
  if (dtype == DType::kFloat32) return run<float>(false, in, cols, g, stream);
  if (dtype == DType::kFloat64) return run<double>(false, in, cols, g, stream);
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace ember::cuda
