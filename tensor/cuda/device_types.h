// Element types as CUDA kernels see them: float16 and bfloat16 as 16-bit storage that computes in
// float (OpMath), with the same round-to-nearest-even conversions as the CPU (tensor/half.h), so a
// device result matches the CPU bit for bit where the arithmetic does. Plus the dtype switch that
// turns a launcher's runtime DType into a kernel's compile-time type. Only .cu files include this.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/cuda/device_code.h"
#include "tensor/cuda/launch.h"

namespace ember::cuda {

__host__ __device__ inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
__host__ __device__ inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// The conversions of tensor/half.h (after Maratyszcza's FP16 library), usable on the device.
__host__ __device__ inline uint16_t float_to_half_bits(float f) {
  const float scale_to_inf = bits_float(0x77800000u);
  const float scale_to_zero = bits_float(0x08800000u);
  const float af = f < 0 ? -f : f;
  float base = (af * scale_to_inf) * scale_to_zero;
  const uint32_t w = float_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = bits_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = float_bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
__host__ __device__ inline float half_bits_to_float(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = bits_float((two_w >> 4) + (0xE0u << 23)) * bits_float(0x07800000u);
  const float denormalized = bits_float((two_w >> 17) | (126u << 23)) - 0.5f;
  return bits_float(sign |
                    (two_w < (1u << 27) ? float_bits(denormalized) : float_bits(normalized)));
}
__host__ __device__ inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__host__ __device__ inline float bfloat16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

struct Half {
  uint16_t bits;
  Half() = default;
  __host__ __device__ Half(float f) : bits(float_to_half_bits(f)) {}
  __host__ __device__ operator float() const { return half_bits_to_float(bits); }
};
struct BFloat16 {
  uint16_t bits;
  BFloat16() = default;
  __host__ __device__ BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}
  __host__ __device__ operator float() const { return bfloat16_bits_to_float(bits); }
};

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
struct OpMathOf {
  using type = T;
};
template <>
struct OpMathOf<Half> {
  using type = float;
};
template <>
struct OpMathOf<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMathOf<T>::type;

template <typename T>
constexpr bool is_floating_v = std::is_floating_point<T>::value || std::is_same<T, Half>::value ||
                               std::is_same<T, BFloat16>::value;

// A host scalar as the kernel's compute type wants it.
template <typename M>
__host__ __device__ M scalar_as(const ScalarArg& s) {
  if constexpr (std::is_same<M, bool>::value) {
    return s.b;
  } else if constexpr (std::is_floating_point<M>::value) {
    return static_cast<M>(s.f);
  } else {
    return static_cast<M>(s.i);
  }
}

// Calls body.template operator()<T>() for the C++ type of `dtype`.
template <typename Body>
int dispatch_all(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::kFloat32: return body(float{});
    case DType::kFloat64: return body(double{});
    case DType::kFloat16: return body(Half{});
    case DType::kBFloat16: return body(BFloat16{});
    case DType::kInt32: return body(int32_t{});
    case DType::kInt64: return body(int64_t{});
    case DType::kUInt8: return body(uint8_t{});
    case DType::kBool: return body(bool{});
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

// body(float{}) or body(double{}) for the kernels that take the two floating dtypes only.
template <typename Body>
int dispatch_float_and_double(DType dtype, Body&& body) {
  if (dtype == DType::kFloat32) return body(float{});
  if (dtype == DType::kFloat64) return body(double{});
  return static_cast<int>(cudaErrorInvalidValue);
}

// This thread's element offsets in each of N operands for linear index i of the iteration space.
template <int N>
struct Offsets {
  int64_t of[N];
};
template <int N>
__device__ __forceinline__ Offsets<N> offsets_of(const Indexer& ix, int64_t i) {
  Offsets<N> o;
  for (int k = 0; k < N; ++k) o.of[k] = 0;
  for (int d = ix.ndim - 1; d >= 0; --d) {
    const int64_t size = ix.sizes[d];
    const int64_t c = i % size;
    i /= size;
    for (int k = 0; k < N; ++k) o.of[k] += c * ix.strides[k][d];
  }
  return o;
}

}  // namespace ember::cuda
