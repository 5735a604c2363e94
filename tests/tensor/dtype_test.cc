#include <cmath>

#include <gtest/gtest.h>

#include "tensor/all.h"

namespace ember {
namespace {

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is exactly halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(Half(1.0f + std::ldexp(1.0f, -11)).x, Half(1.0f).x);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: ties go to even (1 + 2^-9).
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(NAN))));
}

TEST(BFloat16Test, RoundsToNearestEven) {
  // bf16 keeps 8 mantissa bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7, ties to even (1).
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
}

TEST(PromoteTypesTest, FollowsPyTorch) {
  EXPECT_EQ(promote_types(kInt32, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
}

}  // namespace
}  // namespace ember
