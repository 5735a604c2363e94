// im2col / col2im for 2-d convolution over a whole batch: column matrix rows are (c, kh, kw),
// columns are (n, oh, ow). Internal to tensor/ (tensor/conv.cc).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/cpu/capability_namespace.h"
#include "tensor/cpu/conv_geometry.h"

namespace ember::cpu {
namespace CPU_CAPABILITY {  // Note [CPU capability namespaces]

// [lo, hi) of output positions whose input position o*s - p + k*d lies inside [0, size).
inline void valid_range(int64_t size, int64_t out, int64_t s, int64_t p, int64_t kd, int64_t& lo,
                        int64_t& hi) {
  const int64_t shift = kd - p;  // input index = o * s + shift
  lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
  hi = size - shift <= 0 ? 0 : (size - 1 - shift) / s + 1;
  lo = std::min(lo, out);
  hi = std::max(lo, std::min(hi, out));
}

// Stride 1 and "same" width (Wo == W): each (c, kh, kw) row of one image is the input plane
// shifted by a constant offset, so it is one long copy plus zeroed borders instead of Ho short ones.
template <typename T>
void im2col_same_width(const T* in, const ConvGeometry& g, T* cols) {
  const int64_t plane_in = g.H * g.W, plane_out = g.Ho * g.Wo, L = g.N * plane_out;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      int64_t h_lo, h_hi;
      valid_range(g.H, g.Ho, 1, g.ph, i * g.dh, h_lo, h_hi);
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = cols + ((c * g.kh + i) * g.kw + j) * L;
        int64_t w_lo, w_hi;
        valid_range(g.W, g.Wo, 1, g.pw, j * g.dw, w_lo, w_hi);
        const int64_t shift = (i * g.dh - g.ph) * g.W + (j * g.dw - g.pw);
        for (int64_t n = 0; n < g.N; ++n) {
          const T* __restrict plane = in + (n * g.C + c) * plane_in;
          T* __restrict d = row + n * plane_out;
          const int64_t begin = h_lo * g.Wo, end = h_hi * g.Wo;
          for (int64_t k = 0; k < begin; ++k) d[k] = T(0);
          // Clamp so the copy never reads outside this plane; clamped slots are borders anyway.
          const int64_t k0 = std::max(begin, -shift), k1 = std::min(end, plane_in - shift);
          for (int64_t k = begin; k < k0; ++k) d[k] = T(0);
          for (int64_t k = k0; k < k1; ++k) d[k] = plane[k + shift];
          for (int64_t k = std::max(k1, k0); k < end; ++k) d[k] = T(0);
          for (int64_t k = end; k < plane_out; ++k) d[k] = T(0);
          // Column by column: a strided loop of stores, where a row-by-row loop of 1-element
          // runs becomes one memset call per output row.
          for (int64_t ow = 0; ow < w_lo; ++ow) {
            for (int64_t oh = h_lo; oh < h_hi; ++oh) d[oh * g.Wo + ow] = T(0);
          }
          for (int64_t ow = w_hi; ow < g.Wo; ++ow) {
            for (int64_t oh = h_lo; oh < h_hi; ++oh) d[oh * g.Wo + ow] = T(0);
          }
        }
      }
    }
  }
}

template <typename T>
void im2col(const T* in, const ConvGeometry& g, T* cols) {
  if (g.sh == 1 && g.sw == 1 && g.Wo == g.W) return im2col_same_width(in, g, cols);
  const int64_t plane_out = g.Ho * g.Wo, L = g.N * plane_out;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = cols + ((c * g.kh + i) * g.kw + j) * L;
        int64_t w_lo, w_hi;
        valid_range(g.W, g.Wo, g.sw, g.pw, j * g.dw, w_lo, w_hi);
        const int64_t w_shift = j * g.dw - g.pw;
        for (int64_t n = 0; n < g.N; ++n) {
          const T* plane = in + (n * g.C + c) * g.H * g.W;
          T* dst = row + n * plane_out;
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + i * g.dh;
            T* __restrict d = dst + oh * g.Wo;
            if (ih < 0 || ih >= g.H) {
              for (int64_t ow = 0; ow < g.Wo; ++ow) d[ow] = T(0);
              continue;
            }
            // Plain loops (not memcpy/fill): rows are short, and these vectorise without a call.
            const T* __restrict s = plane + ih * g.W + w_shift;
            for (int64_t ow = 0; ow < w_lo; ++ow) d[ow] = T(0);
            if (g.sw == 1) {
              for (int64_t ow = w_lo; ow < w_hi; ++ow) d[ow] = s[ow];
            } else {
              for (int64_t ow = w_lo; ow < w_hi; ++ow) d[ow] = s[ow * g.sw];
            }
            for (int64_t ow = w_hi; ow < g.Wo; ++ow) d[ow] = T(0);
          }
        }
      }
    }
  }
}

// The adjoint of im2col: accumulates columns back into a zero-initialised input gradient.
template <typename T>
void col2im(const T* cols, const ConvGeometry& g, T* in) {
  const int64_t plane_out = g.Ho * g.Wo, L = g.N * plane_out;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = cols + ((c * g.kh + i) * g.kw + j) * L;
        int64_t w_lo, w_hi;
        valid_range(g.W, g.Wo, g.sw, g.pw, j * g.dw, w_lo, w_hi);
        const int64_t w_shift = j * g.dw - g.pw;
        for (int64_t n = 0; n < g.N; ++n) {
          T* plane = in + (n * g.C + c) * g.H * g.W;
          const T* src = row + n * plane_out;
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + i * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            T* __restrict d = plane + ih * g.W;
            const T* __restrict s = src + oh * g.Wo;
            for (int64_t ow = w_lo; ow < w_hi; ++ow) d[ow * g.sw + w_shift] += s[ow];
          }
        }
      }
    }
  }
}

}  // namespace CPU_CAPABILITY
using namespace CPU_CAPABILITY;
}  // namespace ember::cpu
