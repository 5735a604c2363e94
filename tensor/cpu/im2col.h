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

// d [Ho, Wo] = a plane [Hs, Ws] shifted by (dr, dq): d[oh, ow] = plane[oh + dr, ow + dq] where
// that lies inside the plane, else 0. With Ws == Wo the rows are one long copy of the plane
// shifted by a constant, plus zeroed borders, instead of Ho short ones.
template <typename T>
void shifted_plane(const T* __restrict plane, int64_t Hs, int64_t Ws, int64_t dr, int64_t dq,
                   int64_t Ho, int64_t Wo, T* __restrict d) {
  int64_t h_lo, h_hi, w_lo, w_hi;
  valid_range(Hs, Ho, 1, 0, dr, h_lo, h_hi);
  valid_range(Ws, Wo, 1, 0, dq, w_lo, w_hi);
  const int64_t begin = h_lo * Wo, end = h_hi * Wo;
  for (int64_t k = 0; k < begin; ++k) d[k] = T(0);
  for (int64_t k = end; k < Ho * Wo; ++k) d[k] = T(0);
  if (Ws != Wo) {
    for (int64_t oh = h_lo; oh < h_hi; ++oh) {
      T* __restrict row = d + oh * Wo;
      const T* __restrict s = plane + (oh + dr) * Ws + dq;
      for (int64_t ow = 0; ow < w_lo; ++ow) row[ow] = T(0);
      for (int64_t ow = w_lo; ow < w_hi; ++ow) row[ow] = s[ow];
      for (int64_t ow = w_hi; ow < Wo; ++ow) row[ow] = T(0);
    }
    return;
  }
  const int64_t shift = dr * Ws + dq;
  // Clamp so the copy never reads outside the plane; clamped slots are borders anyway.
  const int64_t k0 = std::max(begin, -shift), k1 = std::min(end, Hs * Ws - shift);
  for (int64_t k = begin; k < k0; ++k) d[k] = T(0);
  for (int64_t k = k0; k < k1; ++k) d[k] = plane[k + shift];
  for (int64_t k = std::max(k1, k0); k < end; ++k) d[k] = T(0);
  // Column by column: a strided loop of stores, where a row-by-row loop of 1-element runs becomes
  // one memset call per output row.
  for (int64_t ow = 0; ow < w_lo; ++ow) {
    for (int64_t oh = h_lo; oh < h_hi; ++oh) d[oh * Wo + ow] = T(0);
  }
  for (int64_t ow = w_hi; ow < Wo; ++ow) {
    for (int64_t oh = h_lo; oh < h_hi; ++oh) d[oh * Wo + ow] = T(0);
  }
}

// Stride 1 and "same" width (Wo == W): each (c, kh, kw) row of one image is the input plane
// shifted by a constant offset.
template <typename T>
void im2col_same_width(const T* in, const ConvGeometry& g, T* cols) {
  const int64_t plane_in = g.H * g.W, plane_out = g.Ho * g.Wo, L = g.N * plane_out;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = cols + ((c * g.kh + i) * g.kw + j) * L;
        for (int64_t n = 0; n < g.N; ++n) {
          shifted_plane(in + (n * g.C + c) * plane_in, g.H, g.W, i * g.dh - g.ph, j * g.dw - g.pw,
                        g.Ho, g.Wo, row + n * plane_out);
        }
      }
    }
  }
}

// Note [Stride-2 columns from parity planes]
// With stride 2 (no dilation), tap (i, j) reads input row 2 oh + i - ph: row oh + floor((i - ph)
// / 2) of the plane of rows of parity (i - ph) mod 2, and likewise for columns. Split once into
// the four parity planes, every (c, i, j) row of the column matrix is one of them shifted, as in
// the stride-1 case: a long copy instead of Ho stride-2 gathers of Wo floats (ResNet's strided
// 3x3 layers and 1x1 projections, at 28x28 -> 14x14 and 14x14 -> 7x7). The planes take
// im2col_parity_size floats.
inline bool im2col_by_parity(const ConvGeometry& g) {
  return g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1;
}

// Floats of one parity plane as laid out: every plane as large as the even rows' and columns'.
inline int64_t parity_plane_size(const ConvGeometry& g) { return ((g.H + 1) / 2) * ((g.W + 1) / 2); }

inline int64_t im2col_parity_size(const ConvGeometry& g) {
  return im2col_by_parity(g) ? 4 * g.C * parity_plane_size(g) : 0;
}

// One image (g.N == 1): `planes` holds im2col_parity_size floats.
template <typename T>
void im2col_stride2(const T* in, const ConvGeometry& g, T* cols, T* planes) {
  const int64_t plane_out = g.Ho * g.Wo;
  const int64_t rows[2] = {(g.H + 1) / 2, g.H / 2}, widths[2] = {(g.W + 1) / 2, g.W / 2};
  // Plane (a, b) of channel c at planes + (c * 4 + 2 a + b) * quarter.
  const int64_t quarter = parity_plane_size(g);
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t h = 0; h < g.H; ++h) {
      const T* __restrict s = in + (c * g.H + h) * g.W;
      T* __restrict even = planes + (c * 4 + 2 * (h % 2)) * quarter + (h / 2) * widths[0];
      T* __restrict odd = planes + (c * 4 + 2 * (h % 2) + 1) * quarter + (h / 2) * widths[1];
      for (int64_t q = 0; q < widths[1]; ++q) {
        even[q] = s[2 * q];
        odd[q] = s[2 * q + 1];
      }
      if (g.W % 2) even[widths[0] - 1] = s[g.W - 1];
    }
  }
  // Floor division of a tap offset that may be negative: (i - ph) = 2 dr + a.
  auto split = [](int64_t offset, int64_t& shift, int64_t& parity) {
    parity = ((offset % 2) + 2) % 2;
    shift = (offset - parity) / 2;
  };
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      int64_t dr, a;
      split(i - g.ph, dr, a);
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t dq, b;
        split(j - g.pw, dq, b);
        shifted_plane(planes + (c * 4 + 2 * a + b) * quarter, rows[a], widths[b], dr, dq, g.Ho,
                      g.Wo, cols + ((c * g.kh + i) * g.kw + j) * plane_out);
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
