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
  kFloat32 = 0,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kBool,
};
constexpr int kNumScalarTypes = 8;

// PyTorch-style short names.
constexpr ScalarType kFloat32 = ScalarType::kFloat32;
constexpr ScalarType kFloat = ScalarType::kFloat32;
constexpr ScalarType kFloat64 = ScalarType::kFloat64;
constexpr ScalarType kDouble = ScalarType::kFloat64;
constexpr ScalarType kFloat16 = ScalarType::kFloat16;
constexpr ScalarType kHalf = ScalarType::kFloat16;
constexpr ScalarType kBFloat16 = ScalarType::kBFloat16;
constexpr ScalarType kInt32 = ScalarType::kInt32;
constexpr ScalarType kInt = ScalarType::kInt32;
constexpr ScalarType kInt64 = ScalarType::kInt64;
constexpr ScalarType kLong = ScalarType::kInt64;
constexpr ScalarType kUInt8 = ScalarType::kUInt8;
constexpr ScalarType kByte = ScalarType::kUInt8;
constexpr ScalarType kBool = ScalarType::kBool;

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
  _(float, kFloat32)              \
  _(double, kFloat64)             \
  _(Half, kFloat16)               \
  _(BFloat16, kBFloat16)          \
  _(int32_t, kInt32)              \
  _(int64_t, kInt64)              \
  _(uint8_t, kUInt8)              \
  _(bool, kBool)
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

#define EMBER_DISPATCH_FLOATING_CASES_(...)                  \
  EMBER_DISPATCH_CASE_(kFloat32, float, __VA_ARGS__)         \
  EMBER_DISPATCH_CASE_(kFloat64, double, __VA_ARGS__)        \
  EMBER_DISPATCH_CASE_(kFloat16, ::ember::Half, __VA_ARGS__) \
  EMBER_DISPATCH_CASE_(kBFloat16, ::ember::BFloat16, __VA_ARGS__)
#define EMBER_DISPATCH_INTEGRAL_CASES_(...)          \
  EMBER_DISPATCH_CASE_(kInt32, int32_t, __VA_ARGS__) \
  EMBER_DISPATCH_CASE_(kInt64, int64_t, __VA_ARGS__) \
  EMBER_DISPATCH_CASE_(kUInt8, uint8_t, __VA_ARGS__)

// EMBER_DISPATCH_ALL_TYPES(dtype, "add", [&] { ... scalar_t ... }): runs the lambda with scalar_t bound.
#define EMBER_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                                       \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_FLOATING_CASES_(__VA_ARGS__)                                       \
      EMBER_DISPATCH_INTEGRAL_CASES_(__VA_ARGS__)                                       \
      EMBER_DISPATCH_CASE_(kBool, bool, __VA_ARGS__)                                    \
    }                                                                                   \
    EMBER_THROW(NAME, ": unknown dtype ", static_cast<int>(TYPE));                      \
  }()

// Floating dtypes only; other dtypes get an error naming the op.
#define EMBER_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                                  \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_FLOATING_CASES_(__VA_ARGS__)                                       \
      default:                                                                          \
        break;                                                                          \
    }                                                                                   \
    EMBER_THROW(NAME, ": expected a floating-point tensor, got dtype ", TYPE);          \
  }()

// Everything but bool (arithmetic on bool is ill-defined for sub, neg, ...).
#define EMBER_DISPATCH_NUMERIC_TYPES(TYPE, NAME, ...)                                   \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_FLOATING_CASES_(__VA_ARGS__)                                       \
      EMBER_DISPATCH_INTEGRAL_CASES_(__VA_ARGS__)                                       \
      default:                                                                          \
        break;                                                                          \
    }                                                                                   \
    EMBER_THROW(NAME, ": not supported for dtype ", TYPE);                              \
  }()

// float32 and float64 only (kernels with no reduced-precision path).
#define EMBER_DISPATCH_FLOAT_AND_DOUBLE(TYPE, NAME, ...)                                \
  [&] {                                                                                 \
    switch (TYPE) {                                                                     \
      EMBER_DISPATCH_CASE_(kFloat32, float, __VA_ARGS__)                                \
      EMBER_DISPATCH_CASE_(kFloat64, double, __VA_ARGS__)                               \
      default:                                                                          \
        break;                                                                          \
    }                                                                                   \
    EMBER_THROW(NAME, ": supports float32 and float64, got dtype ", TYPE);              \
  }()
