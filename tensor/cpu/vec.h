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
inline float sum(Vec v) { return _mm512_reduce_add_ps(v); }
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
inline float sum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
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
inline float sum(Vec v) {
  __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}
#endif

}  // namespace ember::cpu::CPU_CAPABILITY::vec
