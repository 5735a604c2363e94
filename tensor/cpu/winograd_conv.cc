#include "tensor/cpu/winograd_conv.h"

#include <algorithm>
#include <cstring>

#include "tensor/cpu/vec.h"
#include "tensor/cpu/winograd_tiles.h"
#include "tensor/parallel.h"

// Note [Winograd F(2x2, 3x3)]
// Lavin & Gray's minimal filtering: a 2x2 block of outputs of a 3x3 convolution is
// Y = A^T [ (G g G^T) (.) (B^T d B) ] A, summed over input channels, where d is the 4x4 input tile
// under the block and (.) multiplies elementwise. Per channel pair that is 16 multiplications for
// 4 outputs instead of 36: with the sum over channels taken inside, the 16 products become 16
// independent GEMMs M[x] [O, T] = U[x] [O, C] x V[x] [C, T] over the T tiles of the image,
// x = 4 i + j indexing the 4x4 transformed tile:
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1].
// The transforms only add and subtract (G's halves are exact), and U is rounded once from double,
// so the result differs from the direct sum by a few float roundings: tests/tensor/nn_ops_test's
// Conv2d.WinogradMatchesFloat64 states the bound.
// Why not F(4x4, 3x3) (2.25 multiplications per output instead of 4): its transforms' coefficients
// (up to 8 in A^T, 1/24 in G) cost accuracy. scripts/winograd_error.py, at ResNet-20's three
// layers in float32: rms error vs float64 is 1.7x a direct float32 sum's for F(2x2), 8.6-12.6x for
// F(4x4) with Lavin & Gray's points and 6.8-7.3x with 0, +-1/2, +-2; max error / max output
// 1.9-3.1e-7, 3.1-3.9e-6 and 1.8-3.4e-6. F(4x4) would break the test's 2e-6 bound and make ember's
// float32 convolutions less accurate than PyTorch's direct ones, which ember does not allow.
//
// Note [Winograd flat tiles]
// Every transform is one loop over a whole plane, so that it runs at the level's vector width
// however narrow the map. The padded input is kept as two planes, its even rows and its odd rows,
// each row Wp = 2 tq floats wide; tile t = ty tq + tx then reads row 2ty + i of the padded input
// at flat offset 2 t + k of plane i % 2 (+ Wp for i >= 2), an affine index in t. tq is tw + 1 (one
// junk tile per row, computed and never read) unless the last tile's columns 2 tw and 2 tw + 1 may
// wrap onto the next row's columns 0 and 1: with an odd Wo and left padding, column 2 tw is padding
// (zero, as column 0 is) and column 2 tw + 1 feeds only the discarded output column Wo; then
// tq = tw; with one column of padding each side and an even width, the planes drop the left
// padding column instead (Note [Winograd compact rows]). The GEMMs use explicit vectors of the
// level's width (16 floats with AVX-512, 8 with AVX2, 4 at baseline).
//
// Note [Winograd compact rows]
// ResNet's 3x3 layers and their input gradients have one column of padding each side and an even
// width W = Wo. The junk tile would there be one GEMM column in every tw + 1, and at 28x28 it takes
// the columns from 196 tiles to 210, two vectors more (224 instead of 208). So their planes drop
// the left padding column: rows are W = 2 tw wide, tq = tw, and tile t reads flat offset
// 2 t + k - 1. Two values per tile row then come out wrong: the first tile's d0 is the previous
// row's last column (it should be the left padding, 0) and the last tile's d3 the next row's
// first (the right padding, 0). The row pass rewrites the two values of h they feed, h0 = 0 - d2
// and h3 = d1 - 0, after its loop: the same floats as with the padding. The forward and input
// gradient come out bit for bit as before; the weight gradient's sums over tiles fall into other
// vector lanes, so its last bits may differ. (At 14x14 the 49 tiles still take 64 columns.)

namespace ember::cpu::CPU_CAPABILITY {
namespace {

using vec::kLanes;
using vec::Vec;
using winograd::kRows;
using winograd::multiply;
using winograd::tiling;
using winograd::Tiling;
using winograd::transform_input;

constexpr int64_t kVectors = 3;  // vectors of tiles per GEMM tile, at most
constexpr int64_t kColumnsPerCall = 32;  // GEMM columns winograd_conv aims for: images x Tpad

// The transforms' inner loops, with __restrict parameters (which GCC honours, unlike restrict
// locals) so that they vectorise.

// d B along rows: d_k = p[2 s + k] is column 2 tx + k of the tile's row at position s.
void row_transform(const float* __restrict p, float* __restrict h0, float* __restrict h1,
                   float* __restrict h2, float* __restrict h3, int64_t n) {
  for (int64_t s = 0; s < n; ++s) {
    const float d0 = p[2 * s], d1 = p[2 * s + 1], d2 = p[2 * s + 2], d3 = p[2 * s + 3];
    h0[s] = d0 - d2;
    h1[s] = d1 + d2;
    h2[s] = d2 - d1;
    h3[s] = d1 - d3;
  }
}

void column_transform(const float* __restrict ev, const float* __restrict ov, int64_t tq,
                      float* __restrict v0, float* __restrict v1, float* __restrict v2,
                      float* __restrict v3, int64_t n) {
  for (int64_t q = 0; q < n; ++q) {
    v0[q] = ev[q] - ev[q + tq];
    v1[q] = ov[q] + ev[q + tq];
    v2[q] = ev[q + tq] - ov[q];
    v3[q] = ov[q] - ov[q + tq];
  }
}

// A^T M A for every tile of one output channel in one pass: rows first, a_i = M_i0 + M_i1 + M_i2
// and b_i = M_i1 - M_i2 - M_i3, then down the columns, y0 = r0 + r1 + r2 and y1 = r1 - r2 - r3
// (M_ij = m[(4 i + j) step + q]). Tile q's 2x2 outputs land side by side, top[2 q + k] and
// bottom[2 q + k], so tile row ty's two output rows start at 2 tq ty. One loop over every tile
// of the map (it vectorises, where per-row loops of Wo / 2 tiles ran mostly as scalar
// remainders), rather than a pass per row of the tile and then per column: perf put this
// transform at 10% of a ResNet-20 step.
void output_tiles(const float* __restrict m, int64_t step, float* __restrict top,
                  float* __restrict bottom, int64_t n) {
  for (int64_t q = 0; q < n; ++q) {
    float a[4], b[4];
    for (int i = 0; i < 4; ++i) {
      const float* mi = m + 4 * i * step + q;
      a[i] = mi[0] + mi[step] + mi[2 * step];
      b[i] = mi[step] - mi[2 * step] - mi[3 * step];
    }
    top[2 * q] = a[0] + a[1] + a[2];
    top[2 * q + 1] = b[0] + b[1] + b[2];
    bottom[2 * q] = a[1] - a[2] - a[3];
    bottom[2 * q + 1] = b[1] - b[2] - b[3];
  }
}

// m [R rows of Tpad] (NV vectors of tiles) = u [R rows of C] x v [C rows of Tpad].
template <int R, int NV>
void gemm_tile(const float* u, int64_t C, const float* v, int64_t Tpad, float* m) {
  // Every loop over the accumulators unrolled (pragmas): otherwise GCC kept the array in memory
  // around the inner loop, storing and reloading all R x NV vectors once per call.
  Vec acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int k = 0; k < NV; ++k) acc[r][k] = vec::zero();
  }
  for (int64_t c = 0; c < C; ++c) {
    Vec x[NV];
    for (int k = 0; k < NV; ++k) x[k] = vec::load(v + c * Tpad + k * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float w = u[r * C + c];
#pragma GCC unroll 3
      for (int k = 0; k < NV; ++k) acc[r][k] = vec::fmadd(w, x[k], acc[r][k]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int k = 0; k < NV; ++k) vec::store(m + r * Tpad + k * kLanes, acc[r][k]);
  }
}

// Output channels per tile for NV vectors of tiles: as many as the accumulator registers allow
// (a small map has one or two vectors of tiles, and then more rows keep the FMAs busy).
constexpr int rows_for(int nv) { return std::min(16, vec::kAccumulators / nv / 4 * 4); }

// Every output channel for NV vectors of tiles starting at column q.
template <int NV>
void gemm_columns(const float* u, const float* v, int64_t C, int64_t O, int64_t Tpad, int64_t q,
                  float* m) {
  constexpr int R = rows_for(NV);
  int64_t o = 0;
  for (; o + R <= O; o += R) gemm_tile<R, NV>(u + o * C, C, v + q, Tpad, m + o * Tpad + q);
  for (; o < O; o += kRows) gemm_tile<kRows, NV>(u + o * C, C, v + q, Tpad, m + o * Tpad + q);
}

}  // namespace

namespace winograd {

Tiling tiling(const ConvGeometry& g) {
  Tiling t;
  t.th = (g.Ho + 1) / 2;
  t.tw = (g.Wo + 1) / 2;
  t.shift = (g.pw == 1 && g.Wo % 2 == 0) ? 1 : 0;
  // Note [Winograd flat tiles]: no junk tile when the last one may wrap onto the next row, nor
  // with compact rows.
  t.tq = (t.shift == 1 || (g.Wo % 2 == 1 && g.pw >= 1)) ? t.tw : t.tw + 1;
  t.T = t.th * t.tq;
  t.Tpad = (t.T + kLanes - 1) / kLanes * kLanes;
  t.S = t.Tpad + t.tq;
  t.plane = 2 * t.S + 4;
  return t;
}

void transform_input(const float* in, const ConvGeometry& g, const Tiling& t, float* v, int64_t ld,
                     float* planes, float* h) {
  const int64_t Wp = 2 * t.tq, Hq = 2 * t.th + 2;
  // Padding, junk columns and the tails are zero; only the input rows are rewritten per channel.
  std::memset(planes, 0, sizeof(float) * static_cast<size_t>(2 * t.plane));
  const int64_t rows_copied = std::min(g.H, Hq - g.ph);
  // Parity k's rows start at rows[k]; tile s reads d_j = reads[k][2 s + j].
  float* rows[2] = {planes + 1, planes + t.plane + 1};
  const float* reads[2] = {rows[0] - t.shift, rows[1] - t.shift};
  for (int64_t c = 0; c < g.C; ++c) {
    const float* plane = in + c * g.H * g.W;
    for (int64_t ih = 0; ih < rows_copied; ++ih) {
      const int64_t r = ih + g.ph;
      std::memcpy(rows[r % 2] + (r / 2) * Wp + g.pw - t.shift, plane + ih * g.W,
                  sizeof(float) * static_cast<size_t>(g.W));
    }
    // h [4 (j), 2 (parity), S]: tile row ty reads padded rows 2ty + i at position t (+ tq for
    // i >= 2) of parity i % 2.
    for (int64_t parity = 0; parity < 2; ++parity) {
      float* hp = h + parity * t.S;
      const float* d = reads[parity];
      row_transform(d, hp, hp + 2 * t.S, hp + 4 * t.S, hp + 6 * t.S, t.S);
      if (t.shift == 1) {  // Note [Winograd compact rows]: each tile row's ends read zeros
        for (int64_t first = 0; first <= t.T; first += t.tq) {
          const int64_t last = first + t.tq - 1;
          hp[first] = 0.0f - d[2 * first + 2];
          hp[6 * t.S + last] = d[2 * last + 1] - 0.0f;
        }
      }
    }
    // B^T down the columns, every tile at once. Columns T..Tpad hold finite junk from the last
    // padded rows: the GEMM keeps columns apart and the output transform never reads them.
    for (int64_t j = 0; j < 4; ++j) {
      const float* ev = h + (j * 2) * t.S;
      const float* ov = ev + t.S;
      float* vj = v + (j * g.C + c) * ld;  // x = 4 i + j: i steps by 4 C ld
      const int64_t step = 4 * g.C * ld;
      column_transform(ev, ov, t.tq, vj, vj + step, vj + 2 * step, vj + 3 * step, t.Tpad);
    }
  }
}

void multiply(const float* u, const float* v, int64_t C, int64_t O, int64_t L, float* m) {
  for (int64_t x = 0; x < 16; ++x) {
    const float* ux = u + x * O * C;
    const float* vx = v + x * C * L;
    float* mx = m + x * O * L;
    // A block of tiles' C rows stay in L1 while the output channels pass over them.
    int64_t q = 0;
    for (; q + kVectors * kLanes <= L; q += kVectors * kLanes) {
      gemm_columns<kVectors>(ux, vx, C, O, L, q, mx);
    }
    if (L - q == 2 * kLanes) {
      gemm_columns<2>(ux, vx, C, O, L, q, mx);
    } else if (L - q == kLanes) {
      gemm_columns<1>(ux, vx, C, O, L, q, mx);
    }
  }
}

}  // namespace winograd

namespace {

// out [O, Ho, Wo] = A^T M A for every output channel and tile of one image whose Tpad columns of
// M [16, O, ld] start at m; y holds 4 T + kLanes floats (a row's whole-vector copy may read up to
// a vector past the last row of `bottom`).
void transform_output(const float* m, int64_t ld, const ConvGeometry& g, int64_t O, const Tiling& t,
                      float* out, float* y) {
  const int64_t Wq = 2 * t.tq;  // a tile row's outputs, junk tile included
  const int64_t copied = (g.Wo + kLanes - 1) / kLanes * kLanes, end = O * g.Ho * g.Wo;
  float *top = y, *bottom = y + 2 * t.T;
  for (int64_t o = 0; o < O; ++o) {
    output_tiles(m + o * ld, O * ld, top, bottom, t.T);  // O ld: from M[x] to M[x + 1]
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t offset = (o * g.Ho + oh) * g.Wo;
      const float* source = (oh % 2 ? bottom : top) + (oh / 2) * Wq;
      // Whole vectors, spilling into the rows after, which their own copies then overwrite: rows
      // of 7-28 floats cost more as memcpy calls (9% of a ResNet-20 step in perf) than as one or
      // two vector copies. Rows near the end are exact: past it lies the next image's output,
      // maybe another thread's.
      if (offset + copied > end) {
        std::memcpy(out + offset, source, sizeof(float) * static_cast<size_t>(g.Wo));
        continue;
      }
      for (int64_t k = 0; k < copied; k += kLanes) {
        vec::store(out + offset + k, vec::load(source + k));
      }
    }
  }
}

}  // namespace

bool winograd_conv_applies(const ConvGeometry& g, int64_t O) {
  // Fewer than 4 input channels (the stem) leave the transforms costing more than they save.
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
         g.ph <= 2 && g.pw <= 2 && g.Ho > 0 && g.Wo > 0 && g.C >= 4 && O % kRows == 0;
}

int64_t winograd_weight_size(const ConvGeometry& g, int64_t O) { return 16 * O * g.C; }

void winograd_transform_weight(const float* weight, WinogradWeight layout, const ConvGeometry& g,
                               int64_t O, float* u) {
  const int64_t C = g.C, step = O * C;  // step: from U[x] to U[x + 1]
  const bool flipped = layout == WinogradWeight::kFlippedTransposed;
  const bool transposed = layout != WinogradWeight::kAsGiven;
  constexpr int64_t kBlock = 64;  // input channels whose taps are gathered at a time
  // Split over output channels: on one thread it was 1.3% of a 2-thread ResNet-20 step.
  parallel_for(0, O, 4, [&](int64_t o_begin, int64_t o_end) {
    double tap[9][kBlock], gk[4][3][kBlock];
    for (int64_t o = o_begin; o < o_end; ++o) {
      for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
        const int64_t n = std::min(kBlock, C - c0);
        // The block's kernels tap by tap, so that the arithmetic below runs down the channels in
        // vectors (reading each kernel's 9 taps in place, it did not vectorise). A flipped kernel's
        // tap q is tap 8 - q.
        for (int64_t c = 0; c < n; ++c) {
          const float* k = weight + (transposed ? (c0 + c) * O + o : o * C + c0 + c) * 9;
          if (flipped) {
            for (int q = 0; q < 9; ++q) tap[q][c] = k[8 - q];
          } else {
            for (int q = 0; q < 9; ++q) tap[q][c] = k[q];
          }
        }
        // G k (4 x 3), then (G k) G^T (4 x 4), in double: U is rounded to float once. Each step
        // is a plain loop down the block's channels (one loop for all of it does not vectorise).
        for (int j = 0; j < 3; ++j) {
          for (int64_t c = 0; c < n; ++c) {
            const double k0 = tap[j][c], k1 = tap[3 + j][c], k2 = tap[6 + j][c];
            gk[0][j][c] = k0;
            gk[1][j][c] = 0.5 * (k0 + k1 + k2);
            gk[2][j][c] = 0.5 * (k0 - k1 + k2);
            gk[3][j][c] = k2;
          }
        }
        for (int i = 0; i < 4; ++i) {
          const double *r0 = gk[i][0], *r1 = gk[i][1], *r2 = gk[i][2];
          // Row o of U[4 i], ..., U[4 i + 3], from channel c0 on.
          float* __restrict u0 = u + (4 * i * O + o) * C + c0;
          float* __restrict u1 = u0 + step;
          float* __restrict u2 = u1 + step;
          float* __restrict u3 = u2 + step;
          for (int64_t c = 0; c < n; ++c) {
            u0[c] = static_cast<float>(r0[c]);
            u1[c] = static_cast<float>(0.5 * (r0[c] + r1[c] + r2[c]));
            u2[c] = static_cast<float>(0.5 * (r0[c] - r1[c] + r2[c]));
            u3[c] = static_cast<float>(r2[c]);
          }
        }
      }
    }
  });
}

int64_t winograd_images_per_call(const ConvGeometry& g) {
  // Small maps (7x7: one vector of 16 tiles) get several images' tiles side by side, so that the
  // GEMMs have wider tiles of columns and U is read once for them. Two, not four: four images'
  // V and M (512 KB at 64 channels) crowd a thread's L2, and conv_bench's 7x7 layer ran at
  // 172-174 GFLOP/s with two against 125-162 with four (1 thread; 2 threads 191-224 vs 174-212).
  return std::clamp<int64_t>(kColumnsPerCall / tiling(g).Tpad, 1, 4);
}

int64_t winograd_conv_scratch_size(const ConvGeometry& g, int64_t O, int64_t images) {
  const Tiling t = tiling(g);
  return 16 * (g.C + O) * images * t.Tpad + 2 * t.plane + 8 * t.S + 4 * t.T + kLanes;
}

void winograd_conv(const float* in, const float* u, const ConvGeometry& g, int64_t O,
                   int64_t images, float* out, float* scratch) {
  const Tiling t = tiling(g);
  const int64_t L = images * t.Tpad;
  float* v = scratch;
  float* m = v + 16 * g.C * L;
  float* planes = m + 16 * O * L;
  float* h = planes + 2 * t.plane;
  float* y = h + 8 * t.S;
  for (int64_t n = 0; n < images; ++n) {
    transform_input(in + n * g.C * g.H * g.W, g, t, v + n * t.Tpad, L, planes, h);
  }
  multiply(u, v, g.C, O, L, m);
  for (int64_t n = 0; n < images; ++n) {
    transform_output(m + n * t.Tpad, L, g, O, t, out + n * O * g.Ho * g.Wo, y);
  }
}

}  // namespace ember::cpu::CPU_CAPABILITY
