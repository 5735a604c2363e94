// Half (IEEE binary16) and BFloat16 storage types with round-to-nearest-even conversion from float.
// Arithmetic goes through float, as in PyTorch's c10::Half; the fp16/bf16 comm hooks rely on exact rounding.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace ember {
namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Float -> binary16 with round-to-nearest-even; overflow goes to inf, NaN stays NaN.
// With F16C (files compiled for AVX2, -march=x86-64-v3) one vcvtps2ph instruction does it; the
// portable version below is the fallback (and the reference the tests compare the two against,
// bit for bit).
// The scaling trick lets the FPU do the rounding (after Maratyszcza's FP16 library).
inline uint16_t float_to_half_bits_portable(float f) {
  const float scale_to_inf = bits_float(0x77800000u);   // 2^112
  const float scale_to_zero = bits_float(0x08800000u);  // 2^-110
  float af = f < 0 ? -f : f;
  float base = (af * scale_to_inf) * scale_to_zero;
  const uint32_t w = float_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = bits_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = float_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float half_bits_to_float_portable(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = bits_float(0x07800000u);  // 2^-112
  const float normalized = bits_float((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float denormalized = bits_float((two_w >> 17) | magic_mask) - 0.5f;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? float_bits(denormalized) : float_bits(normalized));
  return bits_float(result);
}

#if defined(__F16C__)
inline uint16_t float_to_half_bits(float f) {
  // A NaN's payload is not kept by vcvtps2ph either way; canonicalise it like the portable path.
  if (f != f) return static_cast<uint16_t>((float_bits(f) >> 16 & 0x8000u) | 0x7E00u);
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
inline float half_bits_to_float(uint16_t h) { return _cvtsh_ss(h); }
#else
inline uint16_t float_to_half_bits(float f) { return float_to_half_bits_portable(f); }
inline float half_bits_to_float(uint16_t h) { return half_bits_to_float_portable(h); }
#endif

// Float -> bfloat16 keeps the top 16 bits, rounding to nearest even; NaN is kept quiet.
inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }
}  // namespace detail

// IEEE binary16, the element type of float16 tensors (PyTorch's c10::Half): converts implicitly to
// and from float, rounding to nearest even; from_bits() wraps raw bits.
struct Half {
  uint16_t x = 0;
  struct from_bits_t {};
  Half() = default;
  constexpr Half(uint16_t bits, from_bits_t) : x(bits) {}
  Half(float f) : x(detail::float_to_half_bits(f)) {}  // NOLINT: implicit, like c10::Half
  operator float() const { return detail::half_bits_to_float(x); }  // NOLINT
  static Half from_bits(uint16_t b) { return Half(b, from_bits_t{}); }
};

// bfloat16, the element type of bfloat16 tensors (PyTorch's c10::BFloat16): a float's top 16 bits,
// converted from float with round-to-nearest-even; from_bits() wraps raw bits.
struct BFloat16 {
  uint16_t x = 0;
  struct from_bits_t {};
  BFloat16() = default;
  constexpr BFloat16(uint16_t bits, from_bits_t) : x(bits) {}
  BFloat16(float f) : x(detail::float_to_bfloat16_bits(f)) {}  // NOLINT
  operator float() const { return detail::bfloat16_bits_to_float(x); }  // NOLINT
  static BFloat16 from_bits(uint16_t b) { return BFloat16(b, from_bits_t{}); }
};

}  // namespace ember
