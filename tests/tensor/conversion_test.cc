// dtype conversions: every (source, target) pair through to(dtype) on contiguous, strided and
// zero-size tensors, and the bit-exact rounding of float16/bfloat16 (ties to even, overflow to
// inf, NaN, subnormals) that the fp16/bf16 comm hooks depend on.
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::all_dtypes;
using testing::values;

// Values exactly representable in each source dtype (and, for the floats, in every float dtype).
std::vector<double> source_values(ScalarType t) {
  if (is_floating_point(t)) return {0, 1, -2.5, 100.5, 0.25, -0.75};
  if (t == kUInt8) return {0, 1, 254, 100, 7, 128};
  if (t == kBool) return {0, 1, 1, 0, 1, 0};
  return {0, 1, -2, 100, 7, -300};
}

// What PyTorch gives for one value converted to `to` (hand rules, not ember's code).
double expected_conversion(double v, ScalarType to) {
  if (to == kBool) return v != 0 ? 1 : 0;
  if (is_floating_point(to)) return v;               // every source value is representable
  const double tr = std::trunc(v);                    // float -> int truncates toward zero
  if (to == kUInt8) return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(tr)));
  return tr;
}

Tensor make_source(ScalarType t, const Shape& shape) {
  return testing::f64(source_values(t), shape).to(t);
}

TEST(ConversionTest, EveryPairContiguous) {
  for (ScalarType from : all_dtypes()) {
    const Tensor src = make_source(from, {6});
    ASSERT_EQ(values(src), source_values(from)) << from;
    for (ScalarType to : all_dtypes()) {
      const Tensor out = src.to(to);
      EXPECT_EQ(out.dtype(), to);
      EXPECT_EQ(out.sizes(), src.sizes());
      std::vector<double> expect;
      for (double v : source_values(from)) expect.push_back(expected_conversion(v, to));
      EXPECT_EQ(values(out), expect) << from << " -> " << to;
    }
  }
}

TEST(ConversionTest, EveryPairStridedAndZeroSize) {
  for (ScalarType from : all_dtypes()) {
    const Tensor src = make_source(from, {2, 3}).t();  // [3, 2], strides [1, 3]
    ASSERT_FALSE(src.is_contiguous());
    const std::vector<double> sv = values(src);
    for (ScalarType to : all_dtypes()) {
      const Tensor out = src.to(to);
      EXPECT_EQ(out.sizes(), (Shape{3, 2}));
      EXPECT_EQ(out.is_contiguous(), from != to);  // same dtype: the view itself comes back
      std::vector<double> expect;
      for (double v : sv) expect.push_back(expected_conversion(v, to));
      EXPECT_EQ(values(out), expect) << from << " -> " << to;
      const Tensor z = empty({0, 4}, from).to(to);
      EXPECT_EQ(z.sizes(), (Shape{0, 4}));
      EXPECT_EQ(z.dtype(), to);
    }
  }
}

TEST(ConversionTest, SameDtypeIsNoCopyUnlessAsked) {
  Tensor a = testing::iota({3});
  EXPECT_TRUE(a.to(kFloat32).is_same(a));
  Tensor c = a.to(kFloat32, /*copy=*/true);
  EXPECT_FALSE(c.is_alias_of(a));
  EXPECT_EQ(values(c), values(a));
  EXPECT_TRUE(a.to(kCPU).is_same(a));
  EXPECT_FALSE(a.to(kCPU, true).is_alias_of(a));
}

TEST(ConversionTest, FloatToIntegerEdgeCasesMatchPyTorch) {
  Tensor f = testing::f32({-2.5f, 2.5f, 300.7f, -300.7f, -0.9f});
  EXPECT_TENSOR(f.to(kInt32), (Shape{5}), ({-2, 2, 300, -300, 0}));
  EXPECT_TENSOR(f.to(kUInt8), (Shape{5}), ({254, 2, 44, 212, 0}));  // wraps through int64
  EXPECT_TENSOR(testing::f32({NAN, 0.0f, -0.0f, 0.1f}).to(kBool), (Shape{4}), ({1, 0, 0, 1}));
  EXPECT_TENSOR(testing::i64({(1 << 24) + 1}).to(kFloat32), (Shape{1}), ({16777216.0}));
  EXPECT_TENSOR(testing::i32({70000, -70000}).to(kFloat16), (Shape{2}), ({INFINITY, -INFINITY}));
  EXPECT_TENSOR(testing::i64({300, -1}).to(kUInt8), (Shape{2}), ({44, 255}));
}

uint16_t half_bits(float f) {
  return testing::f32({f}).to(kFloat16).data_ptr<Half>()[0].x;
}
uint16_t bf16_bits(float f) {
  return testing::f32({f}).to(kBFloat16).data_ptr<BFloat16>()[0].x;
}
float from_half_bits(uint16_t b) {
  Tensor h = empty({1}, kFloat16);
  h.data_ptr<Half>()[0] = Half::from_bits(b);
  return h.to(kFloat32).item<float>();
}
float from_bf16_bits(uint16_t b) {
  Tensor h = empty({1}, kBFloat16);
  h.data_ptr<BFloat16>()[0] = BFloat16::from_bits(b);
  return h.to(kFloat32).item<float>();
}

TEST(ConversionTest, Float16RoundsToNearestEven) {
  EXPECT_EQ(half_bits(1.0f), 0x3C00);
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even (down)
  EXPECT_EQ(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // above tie
  EXPECT_EQ(half_bits(-2.0f), 0xC000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(0.1f), 0x2E66);
}

TEST(ConversionTest, Float16OverflowNaNAndSubnormals) {
  EXPECT_EQ(half_bits(65504.0f), 0x7BFF);    // max finite
  EXPECT_EQ(half_bits(65519.99f), 0x7BFF);   // just below the rounding boundary
  EXPECT_EQ(half_bits(65520.0f), 0x7C00);    // tie at the boundary goes to inf
  EXPECT_EQ(half_bits(-1e10f), 0xFC00);
  EXPECT_EQ(half_bits(INFINITY), 0x7C00);
  const uint16_t nan = half_bits(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);      // min normal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);      // min subnormal
  EXPECT_EQ(half_bits(1023 * std::ldexp(1.0f, -24)), 0x03FF);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);      // tie between 0 and min: even
  EXPECT_EQ(half_bits(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie between 1 and 2 ulps: even
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -24)), 0x8001);
  // Back to float: exact.
  EXPECT_EQ(from_half_bits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(from_half_bits(0x03FF), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(from_half_bits(0x7BFF), 65504.0f);
  EXPECT_EQ(from_half_bits(0xC000), -2.0f);
  EXPECT_TRUE(std::isinf(from_half_bits(0x7C00)));
  EXPECT_TRUE(std::isnan(from_half_bits(0x7E00)));
  EXPECT_TRUE(std::signbit(from_half_bits(0x8000)));
}

TEST(ConversionTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);                          // tie, down
  EXPECT_EQ(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);                      // tie, up
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);  // above
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(bf16_bits(3.3895314e38f), 0x7F7F);                       // max finite bf16
  EXPECT_EQ(bf16_bits(-INFINITY), 0xFF80);
  const uint16_t nan = bf16_bits(NAN);
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  // A NaN whose payload sits only in the low bits must not truncate to inf.
  float low_nan;
  const uint32_t low_nan_bits = 0x7F800001u;
  std::memcpy(&low_nan, &low_nan_bits, 4);
  EXPECT_TRUE(std::isnan(from_bf16_bits(bf16_bits(low_nan))));
  EXPECT_EQ(bf16_bits(1e-40f), 0x0001);  // float subnormal 0x000116C2 -> bf16 subnormal
  EXPECT_EQ(from_bf16_bits(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(from_bf16_bits(0x4049), 3.140625f);
}

TEST(ConversionTest, ReducedFloatsToEachOther) {
  // f16 -> bf16 goes through float: 1 + 2^-10 needs 11 bits, bf16 keeps 8: ties to even -> 1.
  Tensor h = testing::f32({1.0f + std::ldexp(1.0f, -10), 65504.0f, std::ldexp(1.0f, -24)}).to(kFloat16);
  Tensor b = h.to(kBFloat16);
  EXPECT_TENSOR(b, (Shape{3}), ({1.0, 65536.0, std::ldexp(1.0, -24)}));
  // bf16 -> f16: 2^20 overflows half.
  EXPECT_TENSOR(testing::f32({1048576.0f, -3.0f}).to(kBFloat16).to(kFloat16), (Shape{2}),
                ({INFINITY, -3.0}));
  // Double rounding through float, as PyTorch does: 1 + 2^-11 + 2^-40 -> float 1 + 2^-11 -> 1.
  EXPECT_TENSOR(testing::f64({1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)}).to(kFloat16),
                (Shape{1}), ({1.0}));
}

}  // namespace
}  // namespace ember
