// Winograd F(2x2, 3x3)'s backward (tensor/cpu/winograd_conv.h): the weight gradient in the
// transformed domain and, from the same transformed output gradient, the input gradient.
#include <algorithm>
#include <cstring>

#include "tensor/cpu/vec.h"
#include "tensor/cpu/winograd_conv.h"
#include "tensor/cpu/winograd_tiles.h"
#include "tensor/parallel.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

using vec::kLanes;
using vec::Vec;
using winograd::kRows;
using winograd::multiply;
using winograd::tiling;
using winograd::Tiling;
using winograd::transform_input;

// Note [Winograd weight gradient]
// The gradient of M[x] = U[x] V[x] is dU[x] [O, C] = dM[x] [O, T] V[x]^T summed over images, with
// dM = A dY A^T per tile (dY the tile's 2x2 output gradient) and then dg = G^T dU G per channel
// pair: 16 products of length T per pair instead of 9 of length 4 T. Junk and padding tiles have
// dY = 0, so their V columns (finite junk) add nothing. G^T dU G is linear, so it runs once per
// call on dU summed over every chunk of images (conv_kernels.cc's WeightGradChunks), not once per
// chunk: at 7x7 with 64 channels, 16 per-chunk transforms of 4096 pairs cost as much as the
// products (conv_bench's 7x7 weight gradient: 58 GFLOP/s with them, 72-78 without). On small
// maps the products run on channel vectors instead (Note [Winograd weight gradient by channel
// vectors]).

// Row i of A dY, r = ca dY_0 + cb dY_1, then its four columns times A^T, for every tile:
// dY_ab = p_a[2 t + b].
void output_grad_rows(const float* __restrict p0, const float* __restrict p1, float ca, float cb,
                      float* __restrict d0, float* __restrict d1, float* __restrict d2,
                      float* __restrict d3, int64_t n) {
  for (int64_t q = 0; q < n; ++q) {
    const float r0 = ca * p0[2 * q] + cb * p1[2 * q];
    const float r1 = ca * p0[2 * q + 1] + cb * p1[2 * q + 1];
    d0[q] = r0;
    d1[q] = r0 + r1;
    d2[q] = r0 - r1;
    d3[q] = -r1;
  }
}

// dM [16, O, ld] (this image's Tpad columns) = A dY A^T for every output channel and tile of one
// image; `planes` holds 2 (2 Tpad) floats: the output gradient's even and odd rows, 2 tq wide.
void transform_output_grad(const float* go, const ConvGeometry& g, int64_t O, const Tiling& t,
                           float* dm, int64_t ld, float* planes) {
  const int64_t Wp = 2 * t.tq, len = 2 * t.Tpad;
  // Columns past Wo, rows past Ho and tiles past T stay zero: no gradient there.
  std::memset(planes, 0, sizeof(float) * static_cast<size_t>(2 * len));
  constexpr float kRowCoefficients[4][2] = {{1, 0}, {1, 1}, {1, -1}, {0, -1}};  // A's rows
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      std::memcpy(planes + (oh % 2) * len + (oh / 2) * Wp, go + (o * g.Ho + oh) * g.Wo,
                  sizeof(float) * static_cast<size_t>(g.Wo));
    }
    const int64_t step = O * ld;  // from dM[x] to dM[x + 1]
    for (int i = 0; i < 4; ++i) {
      float* d = dm + (4 * i * O + o) * ld;
      output_grad_rows(planes, planes + len, kRowCoefficients[i][0], kRowCoefficients[i][1], d,
                       d + step, d + 2 * step, d + 3 * step, t.Tpad);
    }
  }
}

// du [R, CB] (row stride C) += m [R rows of L] . v [CB rows of L]^T.
template <int R, int CB>
void dot_tile(const float* m, const float* v, int64_t L, float* du, int64_t C) {
  Vec acc[R * CB];
  for (int i = 0; i < R * CB; ++i) acc[i] = vec::zero();
  for (int64_t q = 0; q < L; q += kLanes) {
    // CB vectors of V, then one row of dM at a time: R * CB + CB + 1 registers (11 of AVX2's 16
    // at 4 x 2; holding all R rows of dM too, GCC spilled them to the stack at AVX2).
    Vec b[CB];
    for (int k = 0; k < CB; ++k) b[k] = vec::load(v + k * L + q);
    for (int r = 0; r < R; ++r) {
      const Vec a = vec::load(m + r * L + q);
      for (int k = 0; k < CB; ++k) acc[r * CB + k] = vec::fmadd(a, b[k], acc[r * CB + k]);
    }
  }
  float total[R * CB];
  if constexpr (R * CB % kLanes == 0) {
    for (int i = 0; i < R * CB; i += kLanes) vec::store(total + i, vec::sums(acc + i));
  } else {
    for (int i = 0; i < R * CB; ++i) total[i] = vec::sum(acc[i]);
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < CB; ++k) du[r * C + k] += total[r * CB + k];
  }
}

// Input channels per dot tile: 4 x 4 accumulators where 32 registers allow, 4 x 2 with 16.
constexpr int kDotColumns = vec::kAccumulators >= 24 ? 4 : 2;

// dU [16, O, C] += dM [16, O, L] . V [16, C, L]^T. Not inlined: inside winograd_backward, GCC ran
// out of general registers for dot_tile's six row pointers and reloaded them from the stack.
[[gnu::noinline]] void multiply_transposed(const float* dm, const float* v, int64_t C, int64_t O,
                                           int64_t L, float* du) {
  for (int64_t x = 0; x < 16; ++x) {
    for (int64_t o = 0; o < O; o += kRows) {
      // Four output channels' rows stay in L1 while the input channels stream past.
      const float* m = dm + (x * O + o) * L;
      float* d = du + (x * O + o) * C;
      int64_t c = 0;
      for (; c + kDotColumns <= C; c += kDotColumns) {
        dot_tile<kRows, kDotColumns>(m, v + (x * C + c) * L, L, d + c, C);
      }
      for (; c < C; ++c) dot_tile<kRows, 1>(m, v + (x * C + c) * L, L, d + c, C);
    }
  }
}

// Note [Winograd weight gradient by channel vectors]
// On small maps the weight gradient's products are short (L = images x Tpad: 128 at 7x7), and
// dot_tile's sums across lanes cost as much as its products (perf: 53% of dot_tile at 7x7, 30% at
// 14x14, 19% at 28x28). There V is made with input channels in the vector lanes instead, vt [16,
// L, C]: the image is first laid out as [rows, columns, C] with its padding (channel_image: a
// quarter of V's size), then each tile's B^T d B is computed for kLanes channels at once, and
// dU[x] += dM[x] vt[x] runs as outer products, dU[o][c..] += dM[o][l] vt[l][c..], with no sums
// across lanes. Each accumulator sums kOuterBlock products before it is added into dU, so no
// float sum runs longer than dot_tile's lanes did at 28x28 (26 products). Transposing V itself
// instead cost more than the sums it saved (13% of the 14x14 weight gradient).
constexpr int64_t kOuterBlock = 32;

// Where channel vectors pay (conv_bench's weight gradient, interleaved against dot_tile): maps of
// at most 64 tiles (7x7: 16, 14x14: 49), at AVX-512 (7x7 -28%, 14x14 -13%) and AVX2 (-17%,
// -14%). 28x28's 196 tiles keep dot_tile, whose products are long there (channel vectors +6%,
// min of 15 runs), as do 4-lane vectors, whose sums across lanes are cheap (baseline 7x7 +21%,
// 14x14 +84%).
bool channel_vectors_apply(const ConvGeometry& g, const Tiling& t) {
  return kLanes >= 8 && g.C % kLanes == 0 && t.T <= 64;
}

// channel_image's rows and columns: every tile's 4 x 4 input, 2 th + 2 >= H + 2 ph rows by
// 2 tw + 2 >= W + 2 pw columns.
int64_t channel_image_rows(const Tiling& t) { return 2 * t.th + 2; }
int64_t channel_image_columns(const Tiling& t) { return 2 * t.tw + 2; }

// xt [rows, Wq columns, C] = one image, channel innermost, inside a padding the caller has zeroed
// (every pixel is rewritten, the padding never): kLanes channels' planes transposed kLanes pixels
// at a time. Pixel (h, w) lands at row h + ph, column w + pw.
void channel_image(const float* in, const ConvGeometry& g, int64_t Wq, float* xt) {
  const int64_t P = g.H * g.W, C = g.C;
  for (int64_t c = 0; c < C; c += kLanes) {
    const float* planes = in + c * P;
    int64_t h = 0, w = 0;  // pixel p's row and column
    const auto next = [&]() {
      float* at = xt + ((h + g.ph) * Wq + w + g.pw) * C + c;
      if (++w == g.W) w = 0, ++h;
      return at;
    };
    int64_t p = 0;
    for (; p + kLanes <= P; p += kLanes) {
      Vec r[kLanes];
      for (int64_t i = 0; i < kLanes; ++i) r[i] = vec::load(planes + i * P + p);
      vec::transpose(r);
      for (int64_t i = 0; i < kLanes; ++i) vec::store(next(), r[i]);
    }
    for (; p < P; ++p) {
      float* at = next();
      for (int64_t i = 0; i < kLanes; ++i) at[i] = planes[i * P + p];
    }
  }
}

// vt rows first .. first + Tpad (row l of position x at vt + x xs + l C) = B^T d B of each tile of
// one image, kLanes channels at a time, from its channel_image; junk tiles' and padding rows zero
// (their dM columns are zero, and 0 times junk could be NaN).
void transform_input_channels(const float* xt, const ConvGeometry& g, const Tiling& t, int64_t Wq,
                              float* vt, int64_t xs, int64_t first) {
  const int64_t C = g.C;
  for (int64_t tile = 0; tile < t.Tpad; ++tile) {
    const int64_t ty = tile / t.tq, tx = tile % t.tq;
    float* row = vt + (first + tile) * C;
    if (ty >= t.th || tx >= t.tw) {
      for (int64_t x = 0; x < 16; ++x) std::memset(row + x * xs, 0, sizeof(float) * C);
      continue;
    }
    const float* d = xt + (2 * ty * Wq + 2 * tx) * C;
    for (int64_t c = 0; c < C; c += kLanes) {
      Vec h[4][4];  // d B along each of the tile's rows, as row_transform
      for (int64_t i = 0; i < 4; ++i) {
        const float* di = d + i * Wq * C + c;
        const Vec d0 = vec::load(di), d1 = vec::load(di + C), d2 = vec::load(di + 2 * C),
                  d3 = vec::load(di + 3 * C);
        h[i][0] = vec::sub(d0, d2);
        h[i][1] = vec::add(d1, d2);
        h[i][2] = vec::sub(d2, d1);
        h[i][3] = vec::sub(d1, d3);
      }
      for (int64_t j = 0; j < 4; ++j) {  // then B^T down the columns, as column_transform
        float* v = row + j * xs + c;     // x = 4 i + j
        vec::store(v, vec::sub(h[0][j], h[2][j]));
        vec::store(v + 4 * xs, vec::add(h[1][j], h[2][j]));
        vec::store(v + 8 * xs, vec::sub(h[2][j], h[1][j]));
        vec::store(v + 12 * xs, vec::sub(h[1][j], h[3][j]));
      }
    }
  }
}

// du [R rows, stride C] (CB vectors of columns) += m [R rows of L] x vt [L rows, stride C].
template <int R, int CB>
void outer_tile(const float* m, const float* vt, int64_t L, int64_t C, float* du) {
  for (int64_t l0 = 0; l0 < L; l0 += kOuterBlock) {
    Vec acc[R * CB];  // every loop over them unrolled, as gemm_tile's, to keep them in registers
#pragma GCC unroll 16
    for (int i = 0; i < R * CB; ++i) acc[i] = vec::zero();
    const int64_t l1 = std::min(L, l0 + kOuterBlock);
    for (int64_t l = l0; l < l1; ++l) {
      Vec b[CB];
#pragma GCC unroll 4
      for (int k = 0; k < CB; ++k) b[k] = vec::load(vt + l * C + k * kLanes);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const Vec a = vec::broadcast(m[r * L + l]);
#pragma GCC unroll 4
        for (int k = 0; k < CB; ++k) acc[r * CB + k] = vec::fmadd(a, b[k], acc[r * CB + k]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int k = 0; k < CB; ++k) {
        float* d = du + r * C + k * kLanes;
        vec::store(d, vec::add(vec::load(d), acc[r * CB + k]));
      }
    }
  }
}

template <int R, int CB>
void multiply_outer_tiles(const float* dm, const float* vt, int64_t C, int64_t O, int64_t L,
                          int64_t xs, float* du) {
  for (int64_t x = 0; x < 16; ++x) {
    for (int64_t o = 0; o < O; o += R) {
      for (int64_t c = 0; c < C; c += CB * kLanes) {
        outer_tile<R, CB>(dm + (x * O + o) * L, vt + x * xs + c, L, C, du + (x * O + o) * C + c);
      }
    }
  }
}

// dU [16, O, C] += dM [16, O, L] . vt [16 (stride xs), L, C]: R rows of dM by CB vectors of
// input channels per tile, R x CB accumulators (O is a multiple of kRows, C of kLanes). Not
// inlined, as multiply_transposed (not measured for this one separately).
[[gnu::noinline]] void multiply_outer(const float* dm, const float* vt, int64_t C, int64_t O,
                                      int64_t L, int64_t xs, float* du) {
  const int64_t columns = C / kLanes;
  if constexpr (vec::kAccumulators >= 24) {
    if (columns % 4 == 0) return multiply_outer_tiles<4, 4>(dm, vt, C, O, L, xs, du);
    if (columns % 2 == 0 && O % 8 == 0) return multiply_outer_tiles<8, 2>(dm, vt, C, O, L, xs, du);
    // One vector of channels: 8 rows, not 16 (16 row pointers spilt GCC's general registers).
    if (O % 8 == 0) return multiply_outer_tiles<8, 1>(dm, vt, C, O, L, xs, du);
  } else {
    if (columns % 2 == 0) return multiply_outer_tiles<4, 2>(dm, vt, C, O, L, xs, du);
    if (O % 8 == 0) return multiply_outer_tiles<8, 1>(dm, vt, C, O, L, xs, du);
  }
  multiply_outer_tiles<4, 1>(dm, vt, C, O, L, xs, du);
}

// Note [Winograd input gradient]
// With the weight gradient, the input gradient reuses its dM = A dY A^T: dV[x] [C, T] =
// U[x]^T dM[x] (U[x]^T from winograd_transform_weight(kTransposed)), then dx = the adjoint of
// transform_input applied to dV -- its steps transposed, in reverse order: column_transform's,
// row_transform's, then the copy of the input rows into the planes. That is B dV B^T per tile,
// overlapping tiles summed (each input pixel lies under up to four tiles) and padding dropped: the
// exact gradient of the forward's arithmetic. The alternative, a forward convolution of dY with
// the flipped kernel, would transform dY a second time (B^T dY B) and then its output (A^T M A):
// perf put those at 10% of a ResNet-20 step at 1 thread. Note [Winograd compact rows]: where the
// forward rewrote h0 and h3 at each tile row's ends, the adjoint drops the same two terms.

// Adjoint of column_transform for one j, from dV_0j .. dV_3j (n = Tpad floats each): tile q's
// rows 0 and 1 give e1[q], o1[q], its rows 2 and 3 e2[q + tq], o2[q + tq] (the even and odd rows'
// gradients are e1 + e2 and o1 + o2). Two arrays rather than adding into one: the add's load
// would read each vector back from two stores still in flight (16% of winograd_backward's time
// in perf).
void column_adjoint(const float* __restrict v0, const float* __restrict v1,
                    const float* __restrict v2, const float* __restrict v3, int64_t tq,
                    float* __restrict e1, float* __restrict o1, float* __restrict e2,
                    float* __restrict o2, int64_t n) {
  for (int64_t q = 0; q < n; ++q) {
    e1[q] = v0[q];
    o1[q] = v1[q] - v2[q] + v3[q];
    e2[q + tq] = v1[q] + v2[q] - v0[q];
    o2[q + tq] = -v3[q];
  }
}

// Adjoint of row_transform: p[2 s + k] for s < n from h_j = a_j + b_j, which read 0 at -1 and
// n - 1 (tile s contributes its d0, d1 at 2 s, 2 s + 1 and its d2, d3 at 2 s + 2, 2 s + 3).
void row_adjoint(const float* __restrict a0, const float* __restrict a1,
                 const float* __restrict a2, const float* __restrict a3,
                 const float* __restrict b0, const float* __restrict b1,
                 const float* __restrict b2, const float* __restrict b3, float* __restrict p,
                 int64_t n) {
  for (int64_t s = 0; s < n; ++s) {
    const float h0 = a0[s] + b0[s], h1 = a1[s] + b1[s], h2 = a2[s] + b2[s], h3 = a3[s] + b3[s];
    const float g0 = a0[s - 1] + b0[s - 1], g1 = a1[s - 1] + b1[s - 1];
    const float g2 = a2[s - 1] + b2[s - 1], g3 = a3[s - 1] + b3[s - 1];
    p[2 * s] = h0 + (g1 + g2 - g0);
    p[2 * s + 1] = (h1 - h2 + h3) - g3;
  }
}

// dx [C, H, W] of one image = the adjoint of transform_input applied to dV [16, C, ld] (this
// image's Tpad columns). `planes` holds 2 t.plane floats, `h` 16 (t.S + 2).
void transform_input_adjoint(const float* dv, int64_t ld, const ConvGeometry& g, const Tiling& t,
                             float* dx, float* planes, float* h) {
  const int64_t Wp = 2 * t.tq, Hq = 2 * t.th + 2, stride = t.S + 2;
  const int64_t rows_copied = std::min(g.H, Hq - g.ph);
  const int64_t copied = (g.W + kLanes - 1) / kLanes * kLanes, end = g.C * g.H * g.W;
  // h [2 (part), 4 (j), 2 (parity)] arrays of S floats, each with a zero before and after it:
  // part 1 (e1, o1) is written at [0, Tpad), part 2 (e2, o2) at [tq, S); the rest stays zero.
  std::memset(h, 0, sizeof(float) * static_cast<size_t>(16 * stride));
  const auto array = [&](int64_t part, int64_t j, int64_t parity) {
    return h + ((part * 4 + j) * 2 + parity) * stride + 1;
  };
  float* rows[2] = {planes + 1, planes + t.plane + 1};
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t j = 0; j < 4; ++j) {
      const float* vj = dv + (j * g.C + c) * ld;
      const int64_t step = 4 * g.C * ld;
      column_adjoint(vj, vj + step, vj + 2 * step, vj + 3 * step, t.tq, array(0, j, 0),
                     array(0, j, 1), array(1, j, 0), array(1, j, 1), t.Tpad);
    }
    // Every position of the planes that the forward's tiles read is written, so every row copied
    // back below is.
    for (int64_t parity = 0; parity < 2; ++parity) {
      const float *a0 = array(0, 0, parity), *a1 = array(0, 1, parity),
                  *a2 = array(0, 2, parity), *a3 = array(0, 3, parity);
      const float *b0 = array(1, 0, parity), *b1 = array(1, 1, parity),
                  *b2 = array(1, 2, parity), *b3 = array(1, 3, parity);
      float* p = rows[parity] - t.shift;
      row_adjoint(a0, a1, a2, a3, b0, b1, b2, b3, p, t.S + 1);
      if (t.shift == 1) {  // each tile row's first d0 and last d3 read the row next to it
        const auto hj = [&](const float* a, const float* b, int64_t s) { return a[s] + b[s]; };
        for (int64_t first = 0; first <= t.T; first += t.tq) {
          const int64_t s = first - 1, n = first + t.tq;  // the tiles before and after the row
          p[2 * first] = hj(a1, b1, s) + hj(a2, b2, s) - hj(a0, b0, s);
          p[2 * n + 1] = hj(a1, b1, n) - hj(a2, b2, n) + hj(a3, b3, n);
        }
      }
    }
    // Whole vectors, as transform_output copies its rows, except where one would run past the
    // image's last row (beyond lies the next image, maybe another thread's).
    float* plane = dx + c * g.H * g.W;
    for (int64_t ih = 0; ih < rows_copied; ++ih) {
      const int64_t r = ih + g.ph, offset = (c * g.H + ih) * g.W;
      const float* source = rows[r % 2] + (r / 2) * Wp + g.pw - t.shift;
      if (offset + copied > end) {
        std::memcpy(dx + offset, source, sizeof(float) * static_cast<size_t>(g.W));
        continue;
      }
      for (int64_t k = 0; k < copied; k += kLanes) {
        vec::store(dx + offset + k, vec::load(source + k));
      }
    }
    // Rows past transform_input's bound, which no tile reads (none at 3x3, stride 1).
    std::fill(plane + rows_copied * g.W, plane + g.H * g.W, 0.0f);
  }
}

// Images transformed per pass of the weight gradient: their V and dM (16 (C + O) Tpad floats
// each) stay within about 1 MB, in L2 for the products (at 7x7 with 64 channels, 8 images: 512 KB
// gave half as long products, and 2 MB spilt; conv_bench interleaved runs at avx512).
int64_t images_per_pass(const ConvGeometry& g, int64_t O, const Tiling& t, int64_t images) {
  constexpr int64_t kPassFloats = 256 * 1024;
  return std::clamp<int64_t>(kPassFloats / (16 * (g.C + O) * t.Tpad), 1, images);
}

}  // namespace

bool winograd_weight_grad_applies(const ConvGeometry& g, int64_t O) {
  // Smaller maps make each channel pair's product so short that the per-pair sums cost more than
  // the multiplications saved. 7x7 (16 tiles) gains since G^T dU G runs once per call instead of
  // once per chunk (`bazel run -c opt //bench:conv_bench` at avx512 against im2col + GEMM;
  // docs/measurements.md, "Micro-benchmarks").
  return winograd_conv_applies(g, O) && tiling(g).T >= 16;
}

bool winograd_input_grad_applies(const ConvGeometry& g, int64_t O) {
  return winograd_weight_grad_applies(g, O) && g.C % kRows == 0;  // dV's GEMM has C rows
}

int64_t winograd_backward_scratch_size(const ConvGeometry& g, int64_t O, int64_t images) {
  const Tiling t = tiling(g);
  const int64_t L = images_per_pass(g, O, t, images) * t.Tpad;
  // V (or vt, 16 kLanes more), dM; planes and h for every transform; channel_image's xt.
  return 16 * (g.C + O) * L + 16 * kLanes + 2 * t.plane + 16 * (t.S + 2) +
         channel_image_rows(t) * channel_image_columns(t) * g.C;
}

void winograd_backward(const WinogradBackward& args, const ConvGeometry& g, int64_t O,
                       int64_t images, float* scratch) {
  const Tiling t = tiling(g);
  const int64_t pass = images_per_pass(g, O, t, images);
  float* v = scratch;
  float* dm = v + 16 * g.C * pass * t.Tpad + 16 * kLanes;
  float* planes = dm + 16 * O * pass * t.Tpad;
  float* h = planes + 2 * t.plane;
  float* xt = h + 16 * (t.S + 2);
  const bool by_channels = channel_vectors_apply(g, t);
  const int64_t Wq = channel_image_columns(t);
  if (by_channels) {
    std::memset(xt, 0, sizeof(float) * static_cast<size_t>(channel_image_rows(t) * Wq * g.C));
  }
  std::memset(args.du, 0, sizeof(float) * static_cast<size_t>(16 * O * g.C));
  const int64_t in_size = g.C * g.H * g.W, out_size = O * g.Ho * g.Wo;
  for (int64_t first = 0; first < images; first += pass) {
    // The pass's images' tiles side by side: one long product per channel pair.
    const int64_t count = std::min(pass, images - first), L = count * t.Tpad;
    // vt's positions kLanes floats further apart than L C: at a power-of-two stride (7x7: 32 KB)
    // their 16 store streams would share L1 sets (a precaution, not measured).
    const int64_t xs = L * g.C + kLanes;
    for (int64_t n = 0; n < count; ++n) {
      const float* image = args.in + (first + n) * in_size;
      if (by_channels) {
        channel_image(image, g, Wq, xt);
        transform_input_channels(xt, g, t, Wq, v, xs, n * t.Tpad);
      } else {
        transform_input(image, g, t, v + n * t.Tpad, L, planes, h);
      }
      transform_output_grad(args.grad_out + (first + n) * out_size, g, O, t, dm + n * t.Tpad, L,
                            planes);
    }
    if (by_channels) {
      multiply_outer(dm, v, g.C, O, L, xs, args.du);
    } else {
      multiply_transposed(dm, v, g.C, O, L, args.du);
    }
    if (args.dx == nullptr) continue;
    multiply(args.ut, dm, O, g.C, L, v);  // dV = U^T dM, over V (no longer needed)
    for (int64_t n = 0; n < count; ++n) {
      transform_input_adjoint(v + n * t.Tpad, L, g, t, args.dx + (first + n) * in_size, planes, h);
    }
  }
}

void winograd_weight_grad_transform(const float* du, const ConvGeometry& g, int64_t O, float* gw) {
  const int64_t pairs = O * g.C;
  parallel_for(0, pairs, 256, [&](int64_t begin, int64_t end) {
    for (int64_t pair = begin; pair < end; ++pair) {
      double d[4][4];
      for (int x = 0; x < 16; ++x) d[x / 4][x % 4] = du[x * pairs + pair];
      double r[3][4];  // G^T dU
      for (int j = 0; j < 4; ++j) {
        r[0][j] = d[0][j] + 0.5 * (d[1][j] + d[2][j]);
        r[1][j] = 0.5 * (d[1][j] - d[2][j]);
        r[2][j] = 0.5 * (d[1][j] + d[2][j]) + d[3][j];
      }
      float* k = gw + pair * 9;
      for (int a = 0; a < 3; ++a) {
        k[a * 3] = static_cast<float>(r[a][0] + 0.5 * (r[a][1] + r[a][2]));
        k[a * 3 + 1] = static_cast<float>(0.5 * (r[a][1] - r[a][2]));
        k[a * 3 + 2] = static_cast<float>(0.5 * (r[a][1] + r[a][2]) + r[a][3]);
      }
    }
  });
}

}  // namespace ember::cpu::CPU_CAPABILITY
