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

// The conversions a file uses (F16C instructions where it is compiled for AVX2, as the CPU kernels
// are; the portable code elsewhere) agree bit for bit with the portable reference: every half
// value to float, and floats around every half value (exact, midway ties, just above and below)
// back to half; NaN canonicalised the same way.
TEST(HalfTest, FastConversionsMatchThePortableReference) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const float f = detail::half_bits_to_float(static_cast<uint16_t>(h));
    const float r = detail::half_bits_to_float_portable(static_cast<uint16_t>(h));
    ASSERT_TRUE((f != f && r != r) || detail::float_bits(f) == detail::float_bits(r)) << std::hex << h;
    for (uint32_t delta : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu}) {
      for (uint32_t bits : {detail::float_bits(r) + delta, detail::float_bits(r) - delta}) {
        const float x = detail::bits_float(bits);
        ASSERT_EQ(detail::float_to_half_bits(x), detail::float_to_half_bits_portable(x))
            << std::hex << "float bits 0x" << bits;
      }
    }
  }
  for (float x : {1e6f, -1e6f, 65520.0f, 65519.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()}) {
    EXPECT_EQ(detail::float_to_half_bits(x), detail::float_to_half_bits_portable(x)) << x;
  }
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
