// Reads the real Fashion-MNIST test split when the machine has it (skipped otherwise).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "data/idx_reader.h"

namespace ember::data {
namespace {

constexpr const char* kFashionMnistRoot = "/usr/share/datasets/fashion-mnist";

TEST(FashionMnist, TestSplitHasTenThousandBalancedImages) {
  struct stat st;
  const std::string images = std::string(kFashionMnistRoot) + "/t10k-images-idx3-ubyte.gz";
  if (stat(images.c_str(), &st) != 0) GTEST_SKIP() << images << " not present; skipping the real-data check";
  const MnistSplit split = read_mnist(kFashionMnistRoot, /*train=*/false);
  EXPECT_EQ(split.images.sizes(), (Shape{10000, 1, 28, 28}));
  EXPECT_EQ(split.images.dtype(), kUInt8);
  ASSERT_EQ(split.labels.sizes(), (Shape{10000}));
  std::vector<int64_t> histogram(10, 0);
  const int64_t* lab = split.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < 10000; ++i) {
    ASSERT_GE(lab[i], 0);
    ASSERT_LT(lab[i], 10);
    ++histogram[lab[i]];
  }
  EXPECT_EQ(histogram, std::vector<int64_t>(10, 1000));
  // Pixels span the full byte range (a sanity check that the payload is not all zeros).
  const uint8_t* px = split.images.data_ptr<uint8_t>();
  uint8_t lo = 255, hi = 0;
  for (int64_t i = 0; i < split.images.numel(); ++i) {
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 255);
}

}  // namespace
}  // namespace ember::data
