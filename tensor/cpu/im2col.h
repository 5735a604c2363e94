// im2col / col2im for 2-d convolution over a whole batch: column matrix rows are (c, kh, kw),
// columns are (n, oh, ow). Internal to tensor/ (tensor/conv.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ember::cpu {

struct ConvGeometry {
  int64_t N, C, H, W;     // input
  int64_t kh, kw;         // kernel
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t Ho, Wo;         // output
};

// [lo, hi) of output positions whose input position o*s - p + k*d lies inside [0, size).
inline void valid_range(int64_t size, int64_t out, int64_t s, int64_t p, int64_t kd, int64_t& lo,
                        int64_t& hi) {
  const int64_t shift = kd - p;  // input index = o * s + shift
  lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
  hi = size - shift <= 0 ? 0 : (size - 1 - shift) / s + 1;
  lo = std::min(lo, out);
  hi = std::max(lo, std::min(hi, out));
}

template <typename T>
void im2col(const T* in, const ConvGeometry& g, T* cols) {
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
            T* d = dst + oh * g.Wo;
            if (ih < 0 || ih >= g.H) {
              std::fill(d, d + g.Wo, T(0));
              continue;
            }
            const T* s = plane + ih * g.W;
            std::fill(d, d + w_lo, T(0));
            if (g.sw == 1) {
              std::memcpy(d + w_lo, s + w_lo + w_shift, (w_hi - w_lo) * sizeof(T));
            } else {
              for (int64_t ow = w_lo; ow < w_hi; ++ow) d[ow] = s[ow * g.sw + w_shift];
            }
            std::fill(d + w_hi, d + g.Wo, T(0));
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
            T* d = plane + ih * g.W;
            const T* s = src + oh * g.Wo;
            for (int64_t ow = w_lo; ow < w_hi; ++ow) d[ow * g.sw + w_shift] += s[ow];
          }
        }
      }
    }
  }
}

}  // namespace ember::cpu
