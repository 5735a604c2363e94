// ScalarType (ember's dtypes), their sizes and names, type promotion, and the dispatch macro that
// turns a runtime dtype into a compile-time `scalar_t` for a kernel.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "tensor/error.h"
#include "tensor/half.h"

namespace ember {

enum class ScalarType : int8_t {
  Float32 = 0,
  Float64,
  Float16,
  BFloat16,
  Int32,
  Int64,
  UInt8,
  Bool,
};
constexpr int kNumScalarTypes = 8;

// PyTorch-style short names.
constexpr ScalarType kFloat32 = ScalarType::Float32;
constexpr ScalarType kFloat = ScalarType::Float32;
constexpr ScalarType kFloat64 = ScalarType::Float64;
constexpr ScalarType kDouble = ScalarType::Float64;
constexpr ScalarType kFloat16 = ScalarType::Float16;
constexpr ScalarType kHalf = ScalarType::Float16;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kInt32 = ScalarType::Int32;
constexpr ScalarType kInt = ScalarType::Int32;
constexpr ScalarType kInt64 = ScalarType::Int64;
constexpr ScalarType kLong = ScalarType::Int64;
constexpr ScalarType kUInt8 = ScalarType::UInt8;
constexpr ScalarType kByte = ScalarType::UInt8;
constexpr ScalarType kBool = ScalarType::Bool;

size_t element_size(ScalarType t);
const char* dtype_name(ScalarType t);  // "float32", "bfloat16", ...
bool is_floating_point(ScalarType t);
bool is_integral(ScalarType t, bool include_bool = false);
// PyTorch's promote_types: bool < integers < floating; f16 + bf16 -> f32.
ScalarType promote_types(ScalarType a, ScalarType b);

std::ostream& operator<<(std::ostream& os, ScalarType t);

template <typename T>
struct CppTypeToScalarType;
#define EMBER_MAP_CPP_TYPE(cpp, st) \
  template <>                       \
  struct CppTypeToScalarType<cpp> { static constexpr ScalarType value = ScalarType::st; };
// Every element type, as _(C++ type, ScalarType enumerator).
#define EMBER_FORALL_CPP_TYPES(_) \
  _(float, Float32)               \
  _(double, Float64)              \
  _(Half, Float16)                \
  _(BFloat16, BFloat16)           \
  _(int32_t, Int32)               \
  _(int64_t, Int64)               \
  _(uint8_t, UInt8)               \
  _(bool, Bool)
EMBER_FORALL_CPP_TYPES(EMBER_MAP_CPP_TYPE)
#undef EMBER_MAP_CPP_TYPE

template <typename T>
constexpr ScalarType dtype_of() {
  return CppTypeToScalarType<T>::value;
}

// Accumulation type for reductions: wider than the element so sums of many terms stay accurate.
template <typename T> struct AccType { using type = double; };
template <> struct AccType<int32_t> { using type = int64_t; };
template <> struct AccType<int64_t> { using type = int64_t; };
template <> struct AccType<uint8_t> { using type = int64_t; };
template <> struct AccType<bool> { using type = int64_t; };
template <typename T> using acc_t = typename AccType<T>::type;

}  // namespace ember

#define EMBER_DISPATCH_CASE_(st, cpp, ...) \
  case ::ember::ScalarType::st: {          \
    using scalar_t = cpp;                  \
    return __VA_ARGS__();                  \
  }

// EMBER_DISPATCH_ALL_TYPES(dtype, "add", [&] { ... scalar_t ... }): runs the lambda with scalar_t bound.
#define EMBER_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                                       \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_CASE_(Float32, float, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Float64, double, __VA_ARGS__)                                \
      EMBER_DISPATCH_CASE_(Float16, ::ember::Half, __VA_ARGS__)                         \
      EMBER_DISPATCH_CASE_(BFloat16, ::ember::BFloat16, __VA_ARGS__)                    \
      EMBER_DISPATCH_CASE_(Int32, int32_t, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Int64, int64_t, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(UInt8, uint8_t, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Bool, bool, __VA_ARGS__)                                     \
    }                                                                                   \
    EMBER_THROW(NAME, ": unknown dtype ", static_cast<int>(TYPE));                      \
  }()

// Floating dtypes only; other dtypes get an error naming the op.
#define EMBER_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                                  \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_CASE_(Float32, float, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Float64, double, __VA_ARGS__)                                \
      EMBER_DISPATCH_CASE_(Float16, ::ember::Half, __VA_ARGS__)                         \
      EMBER_DISPATCH_CASE_(BFloat16, ::ember::BFloat16, __VA_ARGS__)                    \
      default:                                                                          \
        break;                                                                          \
    }                                                                                   \
    EMBER_THROW(NAME, ": expected a floating-point tensor, got dtype ", TYPE);          \
  }()

// Everything but bool (arithmetic on bool is ill-defined for sub, neg, ...).
#define EMBER_DISPATCH_NUMERIC_TYPES(TYPE, NAME, ...)                                   \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_CASE_(Float32, float, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Float64, double, __VA_ARGS__)                                \
      EMBER_DISPATCH_CASE_(Float16, ::ember::Half, __VA_ARGS__)                         \
      EMBER_DISPATCH_CASE_(BFloat16, ::ember::BFloat16, __VA_ARGS__)                    \
      EMBER_DISPATCH_CASE_(Int32, int32_t, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Int64, int64_t, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(UInt8, uint8_t, __VA_ARGS__)                                 \
      default:                                                                          \
        break;                                                                          \
    }                                                                                   \
    EMBER_THROW(NAME, ": not supported for dtype ", TYPE);                              \
  }()

// float32 and float64 only (kernels with no reduced-precision path).
#define EMBER_DISPATCH_FLOAT_AND_DOUBLE(TYPE, NAME, ...)                                \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_CASE_(Float32, float, __VA_ARGS__)                                 \
      EMBER_DISPATCH_CASE_(Float64, double, __VA_ARGS__)                                \
      default:                                                                          \
        break;                                                                          \
    }                                                                                   \
    EMBER_THROW(NAME, ": supports float32 and float64, got dtype ", TYPE);              \
  }()
