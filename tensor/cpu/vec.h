// One float vector of the level's width, for the hand-blocked kernels (Winograd, direct
// convolution, batch-norm sums): 16 lanes with AVX-512, 8 with AVX2 + FMA, 4 at baseline. Include only from files
// in CPU_KERNEL_SRCS (Note [CPU capability namespaces]): each level gets its own copy.
#pragma once

#include <cstdint>

#include <immintrin.h>

#include "tensor/cpu/capability_namespace.h"

namespace ember::cpu::CPU_CAPABILITY::vec {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int64_t kLanes = 16;
// Registers the compiler can keep accumulators in, leaving room for the operands.
constexpr int kAccumulators = 24;
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec fmadd(float a, Vec b, Vec c) { return _mm512_fmadd_ps(_mm512_set1_ps(a), b, c); }
inline Vec broadcast(float a) { return _mm512_set1_ps(a); }
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
// g where y > 0 or y is NaN, else 0: ReLU's backward (threshold_backward) on the output y.
inline Vec relu_mask(Vec y, Vec g) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_NLE_UQ), g);
}
inline float sum(Vec v) { return _mm512_reduce_add_ps(v); }
// Lane i of the result is the sum of v[i]'s lanes, for kLanes vectors: a transposing tree of
// adds, about 3 instructions per sum instead of a reduction each.
inline Vec sums(const Vec* v) {
  Vec b[4];
  for (int i = 0; i < 4; ++i) {
    const Vec a0 = _mm512_add_ps(_mm512_unpacklo_ps(v[4 * i], v[4 * i + 1]),
                                 _mm512_unpackhi_ps(v[4 * i], v[4 * i + 1]));
    const Vec a1 = _mm512_add_ps(_mm512_unpacklo_ps(v[4 * i + 2], v[4 * i + 3]),
                                 _mm512_unpackhi_ps(v[4 * i + 2], v[4 * i + 3]));
    // Each 128-bit block k: the block's partial sums of v[4i], ..., v[4i + 3].
    b[i] = _mm512_add_ps(_mm512_shuffle_ps(a0, a1, 0x44), _mm512_shuffle_ps(a0, a1, 0xEE));
  }
  const Vec c0 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88),
                               _mm512_shuffle_f32x4(b[0], b[1], 0xDD));
  const Vec c1 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88),
                               _mm512_shuffle_f32x4(b[2], b[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(c0, c1, 0x88), _mm512_shuffle_f32x4(c0, c1, 0xDD));
}
// r[i] lane j becomes r[j] lane i, for kLanes vectors: pairs of rows interleaved, then pairs of
// pairs, then 128-bit blocks twice (64 shuffles for 256 floats).
inline void transpose(Vec* r) {
  Vec t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4 g + j], block k: column 4 k + j of rows 4 g .. 4 g + 3.
  for (int g = 0; g < 4; ++g) {
    u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    const Vec v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);  // blocks 0, 2 of rows 0-7
    const Vec w0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);  // blocks 1, 3
    const Vec v1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const Vec w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int64_t kLanes = 8;
constexpr int kAccumulators = 12;
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec fmadd(float a, Vec b, Vec c) { return _mm256_fmadd_ps(_mm256_set1_ps(a), b, c); }
inline Vec broadcast(float a) { return _mm256_set1_ps(a); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec relu_mask(Vec y, Vec g) {
  return _mm256_and_ps(_mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_NLE_UQ), g);
}
inline float sum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline Vec sums(const Vec* v) {
  Vec b[2];
  for (int i = 0; i < 2; ++i) {
    const Vec a0 = _mm256_add_ps(_mm256_unpacklo_ps(v[4 * i], v[4 * i + 1]),
                                 _mm256_unpackhi_ps(v[4 * i], v[4 * i + 1]));
    const Vec a1 = _mm256_add_ps(_mm256_unpacklo_ps(v[4 * i + 2], v[4 * i + 3]),
                                 _mm256_unpackhi_ps(v[4 * i + 2], v[4 * i + 3]));
    b[i] = _mm256_add_ps(_mm256_shuffle_ps(a0, a1, 0x44), _mm256_shuffle_ps(a0, a1, 0xEE));
  }
  return _mm256_add_ps(_mm256_permute2f128_ps(b[0], b[1], 0x20),
                       _mm256_permute2f128_ps(b[0], b[1], 0x31));
}
inline void transpose(Vec* r) {
  Vec t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 2; ++g) {
    u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}
#else
using Vec = __m128;
constexpr int64_t kLanes = 4;
constexpr int kAccumulators = 12;
inline Vec zero() { return _mm_setzero_ps(); }
inline Vec load(const float* p) { return _mm_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm_storeu_ps(p, v); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
inline Vec fmadd(float a, Vec b, Vec c) { return fmadd(_mm_set1_ps(a), b, c); }
inline Vec broadcast(float a) { return _mm_set1_ps(a); }
inline Vec add(Vec a, Vec b) { return _mm_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm_sub_ps(a, b); }
inline Vec relu_mask(Vec y, Vec g) { return _mm_and_ps(_mm_cmpnle_ps(y, _mm_setzero_ps()), g); }
inline float sum(Vec v) {
  __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}
inline Vec sums(const Vec* v) {
  const Vec a0 = _mm_add_ps(_mm_unpacklo_ps(v[0], v[1]), _mm_unpackhi_ps(v[0], v[1]));
  const Vec a1 = _mm_add_ps(_mm_unpacklo_ps(v[2], v[3]), _mm_unpackhi_ps(v[2], v[3]));
  return _mm_add_ps(_mm_shuffle_ps(a0, a1, 0x44), _mm_shuffle_ps(a0, a1, 0xEE));
}
inline void transpose(Vec* r) { _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]); }
#endif

}  // namespace ember::cpu::CPU_CAPABILITY::vec
