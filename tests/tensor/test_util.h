// Shared helpers for the tensor suites: an error matcher that checks the ember::Error message, a
// reader that walks a tensor's strides itself (so expected values never go through the code under
// test), and short constructors for small literal tensors.
#pragma once

#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/error_matchers.h"

#include "tensor/all.h"

namespace ember::testing {

// One element of t's storage at element index i, read with t's dtype.
inline double storage_element(const Tensor& t, int64_t i) {
  const char* base = static_cast<const char*>(t.storage().data());
  switch (t.dtype()) {
    case kFloat32: return reinterpret_cast<const float*>(base)[i];
    case kFloat64: return reinterpret_cast<const double*>(base)[i];
    case kFloat16: return static_cast<float>(reinterpret_cast<const Half*>(base)[i]);
    case kBFloat16: return static_cast<float>(reinterpret_cast<const BFloat16*>(base)[i]);
    case kInt32: return reinterpret_cast<const int32_t*>(base)[i];
    case kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]);
    case kUInt8: return reinterpret_cast<const uint8_t*>(base)[i];
    case kBool: return reinterpret_cast<const bool*>(base)[i] ? 1.0 : 0.0;
  }
  return NAN;
}

// The values of t in row-major order, found by walking sizes/strides/offset here, not in ember.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  const int64_t n = t.numel();
  std::vector<int64_t> idx(t.dim(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
    out.push_back(storage_element(t, off));
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++idx[d] < t.sizes()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Shape and values match (NaN matches NaN; |a - e| <= tol * max(1, |e|)).
inline ::testing::AssertionResult tensor_is(const Tensor& t, const Shape& shape,
                                            const std::vector<double>& expected, double tol) {
  if (!t.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (t.sizes() != shape) {
    return ::testing::AssertionFailure() << "shape " << t.shape_str() << ", expected "
                                         << shape_to_string(shape);
  }
  const std::vector<double> got = values(t);
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << got.size() << " values, expected " << expected.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], e = expected[i];
    const bool ok = (std::isnan(g) && std::isnan(e)) || g == e ||
                    std::fabs(g - e) <= tol * std::max(1.0, std::fabs(e));
    if (!ok) {
      return ::testing::AssertionFailure() << "element " << i << " is " << g << ", expected " << e
                                           << " (tensor " << t << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

#define EXPECT_TENSOR(t, shape, ...) \
  EXPECT_TRUE(::ember::testing::tensor_is((t), (shape), std::vector<double> __VA_ARGS__, 1e-6))
#define EXPECT_TENSOR_NEAR(t, shape, tol, ...) \
  EXPECT_TRUE(::ember::testing::tensor_is((t), (shape), std::vector<double> __VA_ARGS__, (tol)))

// Literal tensors: f32({1, 2, 3, 4}, {2, 2}); an empty shape means 1-d.
inline Tensor f32(const std::vector<float>& v, const Shape& s = {}) { return from_vector(v, s); }
inline Tensor f64(const std::vector<double>& v, const Shape& s = {}) { return from_vector(v, s); }
inline Tensor i32(const std::vector<int32_t>& v, const Shape& s = {}) { return from_vector(v, s); }
inline Tensor i64(const std::vector<int64_t>& v, const Shape& s = {}) { return from_vector(v, s); }
inline Tensor u8(const std::vector<uint8_t>& v, const Shape& s = {}) { return from_vector(v, s); }
inline Tensor b8(const std::vector<bool>& v, const Shape& s = {}) { return from_vector(v, s); }

// [0, 1, ..., n-1] as float32 in the given shape, written element by element.
inline Tensor iota(const Shape& s, ScalarType dtype = kFloat32) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor t = from_vector(v, s.empty() ? Shape{} : s);
  if (s.empty()) t = t.view({});
  return dtype == kFloat32 ? t : t.to(dtype);
}

inline const std::vector<ScalarType>& all_dtypes() {
  static const std::vector<ScalarType> d{kFloat32, kFloat64, kFloat16, kBFloat16,
                                         kInt32,   kInt64,   kUInt8,   kBool};
  return d;
}

}  // namespace ember::testing
