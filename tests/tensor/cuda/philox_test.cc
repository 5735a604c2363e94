// Philox4x32-10 against the known-answer vectors published with Random123 (kat_vectors), in every
// build: the device's random numbers rest on it.
#include "tensor/cuda/philox.h"

#include <gtest/gtest.h>

namespace ember::cuda {
namespace {

void expect_philox(Philox4 counter, uint64_t key, Philox4 expected) {
  const Philox4 got = philox4x32_10(counter, key);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.x[i], expected.x[i]) << "word " << i;
}

TEST(PhiloxTest, KnownAnswers) {
  expect_philox({{0, 0, 0, 0}}, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  expect_philox({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffffffffffull,
                {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  expect_philox({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                (uint64_t{0x299f31d0u} << 32) | 0xa4093822u,
                {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

}  // namespace
}  // namespace ember::cuda
