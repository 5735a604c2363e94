// Element conversion between ember's C++ element types. Half/BFloat16 go through float (two
// user-defined conversions cannot chain implicitly); float -> small ints goes through int64 so
// negative values wrap as in PyTorch instead of being undefined behaviour.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/cpu/capability_namespace.h"
#include "tensor/half.h"

namespace ember::cpu {
namespace CPU_CAPABILITY {  // Note [CPU capability namespaces]

template <typename T>
constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_reduced_float_v<From>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (is_reduced_float_v<To>) {
    if constexpr (is_reduced_float_v<From>) return To(static_cast<float>(v));
    else return To(static_cast<float>(v));
  } else if constexpr (is_reduced_float_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

// Arithmetic type for an element: Half/BFloat16 compute in float, everything else in itself.
template <typename T>
using opmath_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

}  // namespace CPU_CAPABILITY
using namespace CPU_CAPABILITY;
}  // namespace ember::cpu
