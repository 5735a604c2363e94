// Batch transforms: exact values of Normalize, crop offsets replayed from the same Generator against a
// naive padded-image reference, flips, reproducibility, and argument errors.
#include "data/transforms.h"

#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "data_test_util.h"
#include "tensor/factories.h"

namespace ember::data {
namespace {

std::vector<float> floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

// [B, C, H, W] float32 whose element at flat index k is k + 1 (no zeros, so padding is visible).
Tensor counting_batch(int64_t b, int64_t c, int64_t h, int64_t w) {
  return arange(1, 1 + b * c * h * w, 1, kFloat32).view({b, c, h, w});
}

TEST(ToFloatBatch, ScalesBytesAndPassesFloatThrough) {
  Tensor bytes = from_vector<uint8_t>({0, 51, 255}, {1, 1, 1, 3});
  const std::vector<float> v = floats(to_float_batch(bytes));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_FLOAT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[1], 0.2f);
  EXPECT_FLOAT_EQ(v[2], 1.0f);
  Tensor f = zeros({1, 1, 2, 2});
  EXPECT_TRUE(to_float_batch(f).is_same(f));
}

TEST(Normalize, PerChannelMeanAndStd) {
  // 2 images, 2 channels, 1x2 pixels.
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 1, 2});
  Generator gen(0);
  const Tensor y = Normalize({1.0, 2.0}, {2.0, 0.5})(x, gen);
  EXPECT_EQ(y.sizes(), x.sizes());
  const std::vector<float> v = floats(y);
  const std::vector<float> expected{0.0f, 0.5f, 2.0f, 4.0f, 2.0f, 2.5f, 10.0f, 12.0f};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(v[i], expected[i]) << i;
  EXPECT_EQ(floats(x)[0], 1.0f);  // the input is untouched
}

TEST(Normalize, SingleValueAppliesToEveryChannel) {
  Tensor x = full({1, 3, 2, 2}, 0.5);
  Generator gen(0);
  for (float v : floats(Normalize({0.5}, {0.25})(x, gen))) EXPECT_FLOAT_EQ(v, 0.0f);
  // Fashion-MNIST's usual constants: 0.2860 and 0.3530.
  Tensor one = full({1, 1, 1, 1}, 1.0);
  EXPECT_NEAR(floats(Normalize({0.2860}, {0.3530})(one, gen))[0], (1.0 - 0.2860) / 0.3530, 1e-6);
}

TEST(NormalizeErrors, BadArguments) {
  Generator gen(0);
  EXPECT_EMBER_ERROR(Normalize({0.1, 0.2}, {1.0}), "Normalize", "equal length", "2 and 1");
  EXPECT_EMBER_ERROR(Normalize({0.1}, {0.0}), "Normalize", "std[0] is 0");
  EXPECT_EMBER_ERROR(Normalize({0.1, 0.2}, {1, 1})(zeros({1, 3, 2, 2}), gen), "Normalize", "2 means",
                     "3 channels");
  EXPECT_EMBER_ERROR(Normalize({0.1}, {1})(zeros({3, 2, 2}), gen), "Normalize", "[B, C, H, W]", "[3, 2, 2]");
  EXPECT_EMBER_ERROR(Normalize({0.1}, {1})(zeros({1, 1, 2, 2}, kUInt8), gen), "Normalize", "float32",
                     "uint8");
}

TEST(RandomCrop, FullPaddedWindowPlacesImageAtThePadding) {
  // Crop size = H + 2p leaves exactly one window: the image framed by p zeros on every side.
  Tensor x = counting_batch(1, 1, 2, 3);
  Generator gen(7);
  const Tensor y = RandomCrop(4, 5, /*padding=*/1)(x, gen);
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 4, 5}));
  EXPECT_EQ(floats(y), (std::vector<float>{0, 0, 0, 0, 0,  //
                                           0, 1, 2, 3, 0,  //
                                           0, 4, 5, 6, 0,  //
                                           0, 0, 0, 0, 0}));
}

// Reference: pad with zeros, then take the window at (top, left) of the padded image.
float padded_at(const std::vector<float>& img, int64_t h, int64_t w, int64_t p, int64_t y, int64_t x) {
  const int64_t sy = y - p, sx = x - p;
  if (sy < 0 || sy >= h || sx < 0 || sx >= w) return 0.0f;
  return img[sy * w + sx];
}

TEST(RandomCrop, MatchesReferenceForTheGeneratorsOffsets) {
  const int64_t b = 16, c = 3, h = 6, w = 5, size = 4, pad = 3;
  Tensor x = counting_batch(b, c, h, w);
  Generator gen(123);
  const std::vector<float> out = floats(RandomCrop(size, pad)(x, gen));
  const std::vector<float> in = floats(x);
  // Replay the documented draws: per image, top then left, uniform over the padded positions.
  Generator replay(123);
  std::set<std::pair<int64_t, int64_t>> offsets_seen;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t top = static_cast<int64_t>(replay.next_below(h + 2 * pad - size + 1));
    const int64_t left = static_cast<int64_t>(replay.next_below(w + 2 * pad - size + 1));
    offsets_seen.insert({top, left});
    for (int64_t ch = 0; ch < c; ++ch) {
      const std::vector<float> plane(in.begin() + (i * c + ch) * h * w, in.begin() + (i * c + ch + 1) * h * w);
      for (int64_t y = 0; y < size; ++y) {
        for (int64_t xx = 0; xx < size; ++xx) {
          ASSERT_EQ(out[((i * c + ch) * size + y) * size + xx], padded_at(plane, h, w, pad, top + y, left + xx))
              << "image " << i << " channel " << ch << " at (" << y << ", " << xx << "), offset (" << top << ", "
              << left << ")";
        }
      }
    }
  }
  EXPECT_GT(offsets_seen.size(), 8u);  // the offsets really vary from image to image
}

TEST(RandomCrop, Uint8AndNoPadding) {
  Tensor x = arange(0, 2 * 16, 1, kUInt8).view({2, 1, 4, 4});
  Generator gen(5);
  const Tensor y = RandomCrop(4, 0)(x, gen);  // the only window is the image itself
  EXPECT_EQ(y.dtype(), kUInt8);
  EXPECT_EQ(0, std::memcmp(y.data_ptr(), x.data_ptr(), 32));
}

TEST(RandomCropErrors, BadArguments) {
  Generator gen(0);
  EXPECT_EMBER_ERROR(RandomCrop(0, 1), "RandomCrop", "size 0x0");
  EXPECT_EMBER_ERROR(RandomCrop(4, -1), "RandomCrop", "padding -1");
  EXPECT_EMBER_ERROR(RandomCrop(9, 2)(zeros({1, 1, 4, 4}), gen), "RandomCrop", "crop 9x9", "8x8");
  EXPECT_EMBER_ERROR(RandomCrop(2, 0)(zeros({1, 1, 4, 4}, kInt64), gen), "RandomCrop", "float32 or uint8");
}

TEST(RandomHorizontalFlip, AlwaysAndNever) {
  Tensor x = counting_batch(2, 2, 2, 3);
  Generator gen(1);
  EXPECT_EQ(floats(RandomHorizontalFlip(0.0)(x, gen)), floats(x));
  const std::vector<float> flipped = floats(RandomHorizontalFlip(1.0)(x, gen));
  const std::vector<float> in = floats(x);
  for (int64_t row = 0; row < 2 * 2 * 2; ++row) {
    for (int64_t col = 0; col < 3; ++col) EXPECT_EQ(flipped[row * 3 + col], in[row * 3 + 2 - col]);
  }
}

TEST(RandomHorizontalFlip, FlipsWholeImagesWithProbabilityP) {
  const int64_t b = 400;
  Tensor x = counting_batch(b, 3, 1, 2);  // each row [a, a+1]: flipped iff first > second
  Generator gen(99);
  const std::vector<float> y = floats(RandomHorizontalFlip(0.5)(x, gen));
  int64_t flipped = 0;
  for (int64_t i = 0; i < b; ++i) {
    const bool f = y[i * 6] > y[i * 6 + 1];
    for (int ch = 1; ch < 3; ++ch) EXPECT_EQ(f, y[i * 6 + 2 * ch] > y[i * 6 + 2 * ch + 1]) << "image " << i;
    flipped += f;
  }
  EXPECT_GT(flipped, 150);
  EXPECT_LT(flipped, 250);
  // Same seed, same flips; the uint8 path makes the same decisions.
  Generator again(99);
  EXPECT_EQ(floats(RandomHorizontalFlip(0.5)(x, again)), y);
  Generator bytes_gen(99);
  const Tensor yb = RandomHorizontalFlip(0.5)(arange(0, b * 6, 1, kFloat32).view({b, 3, 1, 2}).to(kUInt8), bytes_gen);
  EXPECT_EQ(yb.dtype(), kUInt8);
  EXPECT_EQ(yb.data_ptr<uint8_t>()[0] > yb.data_ptr<uint8_t>()[1], y[0] > y[1]);
  EXPECT_EMBER_ERROR(RandomHorizontalFlip(1.5), "RandomHorizontalFlip", "[0, 1]", "1.5");
}

TEST(ApplyTransforms, RunsInOrder) {
  TransformList list{std::make_shared<RandomCrop>(4, 1), std::make_shared<Normalize>(std::vector<double>{1.0},
                                                                                      std::vector<double>{1.0})};
  Tensor x = counting_batch(1, 1, 2, 2);
  Generator gen(3);
  const std::vector<float> y = floats(apply_transforms(list, x, gen));
  // Crop 4 with padding 1 of a 2x2 image is deterministic; normalize subtracts 1 everywhere.
  EXPECT_EQ(y, (std::vector<float>{-1, -1, -1, -1, -1, 0, 1, -1, -1, 2, 3, -1, -1, -1, -1, -1}));
}

}  // namespace
}  // namespace ember::data
