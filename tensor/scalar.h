// Scalar: a number passed to an op (alpha in add, the value in fill_), kept as double, int64 or bool.
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "tensor/dtype.h"

namespace ember {

// PyTorch's c10::Scalar: converts implicitly from any arithmetic type, Half or BFloat16, keeping
// floating values as double, integers as int64 and bools as bool; to<T>() converts back.
class Scalar {
 public:
  enum class Kind : int8_t { kDouble, kInt, kBool };

  Scalar() : kind_(Kind::kInt), i_(0) {}
  Scalar(bool v) : kind_(Kind::kBool), i_(v) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::kInt), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::kDouble), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : kind_(Kind::kDouble), d_(static_cast<float>(v)) {}  // NOLINT
  Scalar(BFloat16 v) : kind_(Kind::kDouble), d_(static_cast<float>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::kDouble; }
  bool is_integral() const { return kind_ == Kind::kInt; }
  bool is_bool() const { return kind_ == Kind::kBool; }

  double to_double() const { return kind_ == Kind::kDouble ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::kDouble ? static_cast<int64_t>(d_) : i_; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return kind_ == Kind::kDouble ? d_ != 0.0 : i_ != 0;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int());
    } else {
      return static_cast<T>(to_double());
    }
  }

  // The dtype a tensor made from this scalar alone would get (PyTorch's defaults).
  ScalarType default_dtype() const {
    return kind_ == Kind::kDouble ? kFloat32 : kind_ == Kind::kInt ? kInt64 : kBool;
  }

 private:
  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_floating_point()) return os << s.to_double();
  if (s.is_bool()) return os << (s.to_int() ? "true" : "false");
  return os << s.to_int();
}

}  // namespace ember
