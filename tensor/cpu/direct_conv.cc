#include "tensor/cpu/direct_conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_DIRECT_CONV 1
#endif

#include "tensor/cpu/vec.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

constexpr int64_t kColumns = 24;  // output positions per block: three 8-float vectors
constexpr int64_t kRows = 4;      // output channels per block
// The grid is padded to whole blocks of the forward kernel and whole vectors of the level's width.
constexpr int64_t kGridQuantum = vec::kLanes == 16 ? 2 * kColumns : kColumns;

struct Layout {
  int64_t Hp, Wp, plane;  // padded input
  int64_t Q, Qpad;        // outputs on the padded-width grid, rounded up to whole blocks
  int64_t padded_size;    // padded input + slack read by the last block's taps
};

Layout layout(const ConvGeometry& g) {
  Layout l;
  l.Hp = g.H + 2 * g.ph;
  l.Wp = g.W + 2 * g.pw;
  l.plane = l.Hp * l.Wp;
  l.Q = g.Ho * l.Wp;
  l.Qpad = (l.Q + kGridQuantum - 1) / kGridQuantum * kGridQuantum;
  // The last block's taps read up to Qpad - Q + kw - 2 floats past the padded planes.
  l.padded_size = g.C * l.plane + (l.Qpad - l.Q) + kColumns + g.kw;
  return l;
}

#ifdef EMBER_DIRECT_CONV
// Scratch starts with the offset of each (c, i, j) row (8-byte aligned), then the padded image:
// fills both and returns the offsets.
const int64_t* prepare_image(const float* in, const ConvGeometry& g, const Layout& l, float* scratch) {
  const int64_t K = g.C * g.kh * g.kw;
  auto* taps = reinterpret_cast<int64_t*>(scratch);
  float* padded = scratch + 2 * K;
  std::memset(padded, 0, sizeof(float) * static_cast<size_t>(l.padded_size));
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t h = 0; h < g.H; ++h) {
      std::memcpy(padded + c * l.plane + (h + g.ph) * l.Wp + g.pw, in + (c * g.H + h) * g.W,
                  sizeof(float) * static_cast<size_t>(g.W));
    }
  }
  for (int64_t c = 0, k = 0; c < g.C; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) taps[k++] = c * l.plane + i * l.Wp + j;
    }
  }
  return taps;
}

// gw[o + r, k + t] += sum over q of grid[o + r, q] * padded[taps[k + t] + q], for r < 4, t < Taps:
// 4 x Taps accumulators of one vector of positions each (16 with AVX-512), folded once at the end.
template <int Taps>
void weight_grad_tile(const float* grid, int64_t Qpad, const float* padded, const int64_t* taps,
                      int64_t K, float* gw) {
  using vec::Vec;
  Vec acc[4][Taps];
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < Taps; ++t) acc[r][t] = vec::zero();
  }
  const float* x[Taps];
  for (int t = 0; t < Taps; ++t) x[t] = padded + taps[t];
  for (int64_t q = 0; q < Qpad; q += vec::kLanes) {
    Vec xs[Taps];
#pragma GCC unroll 6
    for (int t = 0; t < Taps; ++t) xs[t] = vec::load(x[t] + q);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const Vec gv = vec::load(grid + r * Qpad + q);
#pragma GCC unroll 6
      for (int t = 0; t < Taps; ++t) acc[r][t] = vec::fmadd(gv, xs[t], acc[r][t]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < Taps; ++t) gw[r * K + t] += vec::sum(acc[r][t]);
  }
}

// Taps per weight-gradient tile: four rows of accumulators fill the level's registers.
constexpr int kWeightGradTaps = vec::kAccumulators / 4;
#endif

}  // namespace

bool direct_conv_applies(const ConvGeometry& g, int64_t O) {
#ifdef EMBER_DIRECT_CONV
  // Small channel counts are where im2col costs as much as the product; one input channel (the
  // stem) leaves too little work per tap to pay for the padded copy. The padded-width grid computes
  // Qpad outputs for Ho * Wo real ones: past 25% waste (7x7 maps: 72 for 49) im2col + GEMM wins.
  if (!(g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && O % kRows == 0 && g.C >= 4 &&
        g.kh * g.kw > 1 && g.Ho > 0 && g.Wo > 0)) {
    return false;
  }
  return layout(g).Qpad * 4 <= g.Ho * g.Wo * 5;
#else
  (void)g;
  (void)O;
  return false;
#endif
}

int64_t direct_conv_scratch_size(const ConvGeometry& g, int64_t O) {
  const Layout l = layout(g);
  return 2 * g.C * g.kh * g.kw + l.padded_size + O * l.Qpad;
}

void direct_conv(const float* in, const float* weight, const ConvGeometry& g, int64_t O, float* out,
                 float* scratch) {
#ifdef EMBER_DIRECT_CONV
  const Layout l = layout(g);
  const int64_t K = g.C * g.kh * g.kw;
  const int64_t* taps = prepare_image(in, g, l, scratch);
  float* padded = scratch + 2 * K;
  float* grid = padded + l.padded_size;  // [O, Qpad]

  // Column block outermost: its K input rows (K x 24 floats) stay in L1 across the channel blocks.
  for (int64_t q = 0; q < l.Qpad; q += kColumns) {
    const float* base = padded + q;
    for (int64_t o = 0; o < O; o += kRows) {
      // A 4 x 24 tile of outputs in twelve registers (the loops unroll fully).
      const float* w = weight + o * K;
      __m256 acc[kRows][3];
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        for (int v = 0; v < 3; ++v) acc[r][v] = _mm256_setzero_ps();
      }
      for (int64_t k = 0; k < K; ++k) {
        const float* x = base + taps[k];
        const __m256 xs[3] = {_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16)};
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r) {
          const __m256 wv = _mm256_broadcast_ss(w + r * K + k);
#pragma GCC unroll 3
          for (int v = 0; v < 3; ++v) acc[r][v] = _mm256_fmadd_ps(wv, xs[v], acc[r][v]);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        float* row = grid + (o + r) * l.Qpad + q;
        for (int v = 0; v < 3; ++v) _mm256_storeu_ps(row + 8 * v, acc[r][v]);
      }
    }
  }
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      std::memcpy(out + (o * g.Ho + oh) * g.Wo, grid + o * l.Qpad + oh * l.Wp,
                  sizeof(float) * static_cast<size_t>(g.Wo));
    }
  }
#else
  (void)in, (void)weight, (void)g, (void)O, (void)out, (void)scratch;
#endif
}

int64_t direct_conv_weight_grad_scratch_size(const ConvGeometry& g, int64_t O) {
  return direct_conv_scratch_size(g, O);
}

void direct_conv_weight_grad(const float* in, const float* grad_out, const ConvGeometry& g,
                             int64_t O, float* gw, float* scratch) {
#ifdef EMBER_DIRECT_CONV
  const Layout l = layout(g);
  const int64_t K = g.C * g.kh * g.kw;
  const int64_t* taps = prepare_image(in, g, l, scratch);
  const float* padded = scratch + 2 * K;
  // The output gradient on the padded-width grid [O, Qpad]: zero where the grid has no output
  // (the Wp - Wo columns that straddle two rows, and the tail), so those positions add nothing.
  float* grid = scratch + 2 * K + l.padded_size;
  std::memset(grid, 0, sizeof(float) * static_cast<size_t>(O * l.Qpad));
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      std::memcpy(grid + o * l.Qpad + oh * l.Wp, grad_out + (o * g.Ho + oh) * g.Wo,
                  sizeof(float) * static_cast<size_t>(g.Wo));
    }
  }
  // Four output channels' grid rows stay in L1 while every tap's shifted window streams past.
  for (int64_t o = 0; o < O; o += 4) {
    const float* rows = grid + o * l.Qpad;
    int64_t k = 0;
    for (; k + kWeightGradTaps <= K; k += kWeightGradTaps) {
      weight_grad_tile<kWeightGradTaps>(rows, l.Qpad, padded, taps + k, K, gw + o * K + k);
    }
    for (; k + 3 <= K; k += 3) weight_grad_tile<3>(rows, l.Qpad, padded, taps + k, K, gw + o * K + k);
    for (; k < K; ++k) weight_grad_tile<1>(rows, l.Qpad, padded, taps + k, K, gw + o * K + k);
  }
#else
  (void)in, (void)grad_out, (void)g, (void)O, (void)gw, (void)scratch;
#endif
}

}  // namespace ember::cpu::CPU_CAPABILITY
