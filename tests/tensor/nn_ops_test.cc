// Forward values of the nn primitives against direct reference loops written here (gradients are
// covered by tests/autograd/gradcheck_test.cc).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tensor/nn_ops.h"

namespace ember {
namespace {

// Direct 7-loop convolution in double.
Tensor reference_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  Tensor xd = x.to(kFloat64).contiguous(), wd = w.to(kFloat64).contiguous();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), kh = w.size(2), kw = w.size(3), G = p.groups;
  const int64_t Ho = (H + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1;
  const int64_t Wo = (W + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1;
  Tensor out = zeros({N, O, Ho, Wo}, kFloat64);
  const double* xp = xd.data_ptr<double>();
  const double* wp = wd.data_ptr<double>();
  double* op = out.data_ptr<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = b.defined() ? b.to(kFloat64).data_ptr<double>()[o] : 0.0;
          const int64_t g = o / (O / G);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
                const int64_t iw = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xp[((n * C + g * Cg + c) * H + ih) * W + iw] * wp[((o * Cg + c) * kh + i) * kw + j];
              }
          op[((n * O + o) * Ho + oh) * Wo + ow] = s;
        }
  return out;
}

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
};

TEST(Conv2d, MatchesDirectConvolution) {
  std::vector<ConvCase> cases = {
      {{2, 3, 7, 7}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},   // "same" 3x3 (fast im2col path)
      {{2, 3, 8, 8}, {4, 3, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}},   // strided
      {{1, 4, 6, 9}, {6, 2, 3, 2}, {{1, 2}, {2, 0}, {2, 1}, 2}},   // groups, dilation, asymmetric
      {{3, 4, 5, 5}, {8, 4, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}},   // pointwise (no im2col)
      {{2, 4, 6, 6}, {8, 4, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 1}},   // 1x1 stride-2 projection
      // Stride 2 by parity planes: odd sizes, padding 0 to 2, a 2x4 kernel, ResNet's stage 2.
      {{2, 4, 9, 7}, {6, 4, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}},
      {{1, 3, 7, 8}, {4, 3, 2, 4}, {{2, 2}, {0, 2}, {1, 1}, 1}},
      {{2, 4, 7, 7}, {8, 4, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 1}},
      {{1, 16, 28, 28}, {32, 16, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}},
  };
  Generator gen(5);
  for (const auto& c : cases) {
    Tensor x = randn(c.x, &gen), w = randn(c.w, &gen), b = randn({c.w[0]}, &gen);
    Tensor got = conv2d(x, w, b, c.p);
    Tensor want = reference_conv(x, w, b, c.p);
    EXPECT_TRUE(allclose(got.to(kFloat64), want, 1e-4, 1e-4)) << "x " << shape_to_string(c.x) << " w "
                                                            << shape_to_string(c.w);
  }
}

TEST(Conv2d, DirectFloatPathMatchesReference) {
  // Stride 1, no dilation, one group, >= 4 input and a multiple of 4 output channels, float32,
  // maps wide enough that the padded-width grid wastes <= 25%: the direct kernel
  // (tensor/cpu/direct_conv.cc) runs where Winograd does not apply (not 3x3, padding beyond 2; for
  // the weight gradient also maps under 16 tiles), so ResNet's layers 1 and 2 below check the
  // Winograd paths against float64 too. Widths whose grid is not a whole number of 24-column blocks
  // leave a partial last block; tap counts not a multiple of the weight-gradient tile (6 taps at
  // AVX-512, 3 at AVX2) leave partial tiles; big padding reads only zeros.
  std::vector<ConvCase> cases = {
      {{2, 16, 28, 28}, {16, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // ResNet layer 1
      {{2, 32, 14, 14}, {32, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // layer 2 (input grad too)
      {{1, 4, 5, 21}, {8, 4, 2, 3}, {{1, 1}, {0, 1}, {1, 1}, 1}},      // asymmetric; 92 of 96 columns
      {{2, 8, 20, 20}, {4, 8, 5, 5}, {{1, 1}, {2, 2}, {1, 1}, 1}},
      {{1, 5, 6, 30}, {12, 5, 1, 3}, {{1, 1}, {0, 1}, {1, 1}, 1}},
      {{1, 4, 16, 16}, {4, 4, 3, 3}, {{1, 1}, {3, 3}, {1, 1}, 1}},     // padding beyond the kernel
      {{2, 64, 7, 7}, {64, 64, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},    // 7x7: Winograd for all three
  };
  Generator gen(6);
  for (const auto& c : cases) {
    const std::string name = "x " + shape_to_string(c.x) + " w " + shape_to_string(c.w);
    Tensor x = randn(c.x, &gen), w = randn(c.w, &gen), b = randn({c.w[0]}, &gen);
    Tensor got = conv2d(x, w, b, c.p);
    EXPECT_TRUE(allclose(got.to(kFloat64), reference_conv(x, w, b, c.p), 1e-4, 1e-4)) << name;
    // Gradients against the float64 path (im2col + GEMM, checked by gradcheck).
    Tensor go = randn(got.sizes(), &gen);
    auto [gi, gw, gb] = conv2d_backward(go, x, w, c.p, {true, true, true});
    auto [gi64, gw64, gb64] =
        conv2d_backward(go.to(kFloat64), x.to(kFloat64), w.to(kFloat64), c.p, {true, true, true});
    EXPECT_TRUE(allclose(gi.to(kFloat64), gi64, 1e-4, 1e-3)) << name;
    EXPECT_TRUE(allclose(gw.to(kFloat64), gw64, 1e-4, 1e-3)) << name;
    EXPECT_TRUE(allclose(gb.to(kFloat64), gb64, 1e-4, 1e-3)) << name;
  }
}

// The largest |got - want| over the largest |want|.
double relative_max_error(const Tensor& got, const Tensor& want) {
  Tensor g = got.to(kFloat64).contiguous(), w = want.to(kFloat64).contiguous();
  double err = 0, scale = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    err = std::max(err, std::abs(g.data_ptr<double>()[i] - w.data_ptr<double>()[i]));
    scale = std::max(scale, std::abs(w.data_ptr<double>()[i]));
  }
  return scale > 0 ? err / scale : err;
}

TEST(Conv2d, WinogradMatchesFloat64) {
  // Float32 3x3 stride-1 convolutions with >= 4 input and a multiple of 4 output channels run
  // Winograd F(2x2, 3x3) (tensor/cpu/winograd_conv.cc): forward, input and weight gradients (the
  // weight gradient on maps of 16 tiles or more: all below but 9x3 and 3x11 out and the 1-tile
  // maps; it sums the dU of chunks of 8 images before one G^T dU G, so 7x7's 10 images are two
  // chunks, the second partial, and cases of 1-8 images one chunk). Odd
  // sizes leave half tiles; tile counts below, at and past one, two and three vectors of 4, 8 and 16
  // lanes; padding 0, 1 and 2 (the input gradient of padding 0 pads by 2); 1x1 and 2x2 maps; odd
  // widths with left padding, where the last tile wraps onto the next row (Note [Winograd flat
  // tiles]). With both gradients the input gradient is the adjoint of the forward's transforms
  // where the weight gradient runs by Winograd and C is a multiple of 4 (Note [Winograd input
  // gradient]); alone, it is the convolution with the flipped kernel: both are checked. At AVX2 and
  // AVX-512 the 14x14 and 7x7 stages' weight gradients take channel vectors (Note [Winograd weight
  // gradient by channel vectors]), the 7x7 case's second chunk with 2 images; 12x12 with 16
  // channels takes one vector of them at AVX-512.
  // Bound: max |error| <= 2e-6 of the largest output (float32's epsilon is 1.2e-7; F(2x2, 3x3)
  // adds a few roundings to each product's sum, and ResNet's layers measure ~3e-7 here).
  std::vector<ConvCase> cases = {
      {{2, 16, 28, 28}, {16, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // ResNet-20's three stages
      {{2, 32, 14, 14}, {32, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{10, 64, 7, 7}, {64, 64, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // 2 images per GEMM
      {{1, 4, 1, 1}, {4, 4, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},       // one output, one tile
      {{3, 5, 2, 2}, {8, 5, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{1, 7, 9, 13}, {12, 7, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},     // odd both ways, 35 tiles
      {{2, 6, 11, 5}, {4, 6, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},      // no padding: 9 x 3 out
      {{1, 9, 6, 10}, {20, 9, 3, 3}, {{1, 1}, {2, 2}, {1, 1}, 1}},     // padding 2: 8 x 12 out
      {{1, 4, 8, 17}, {4, 4, 3, 3}, {{1, 1}, {1, 0}, {1, 1}, 1}},      // asymmetric padding
      {{1, 4, 5, 9}, {4, 4, 3, 3}, {{1, 1}, {0, 2}, {1, 1}, 1}},       // odd width 11, padding 2
      {{2, 4, 9, 9}, {8, 4, 3, 3}, {{1, 1}, {2, 2}, {1, 1}, 1}},       // 11x11 out, 36 tiles
      {{1, 17, 32, 32}, {8, 17, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},   // 256 tiles
      {{2, 8, 13, 11}, {4, 8, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},     // adjoint: junk tiles
      {{1, 12, 10, 15}, {8, 12, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},   // adjoint: wrapping
      {{3, 4, 12, 12}, {4, 4, 3, 3}, {{1, 1}, {2, 2}, {1, 1}, 1}},     // adjoint: padding 2
      {{1, 8, 9, 16}, {4, 8, 3, 3}, {{1, 1}, {2, 1}, {1, 1}, 1}},      // adjoint: compact rows
      {{3, 16, 12, 12}, {8, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},   // channel vectors, 8 rows
  };
  Generator gen(7);
  double worst = 0, worst_weight_grad = 0;
  for (const auto& c : cases) {
    const std::string name = "x " + shape_to_string(c.x) + " w " + shape_to_string(c.w) +
                             " padding " + std::to_string(c.p.padding[0]) + "," +
                             std::to_string(c.p.padding[1]);
    Tensor x = randn(c.x, &gen), w = randn(c.w, &gen), b = randn({c.w[0]}, &gen);
    Tensor got = conv2d(x, w, b, c.p);
    Tensor want = reference_conv(x, w, b, c.p);
    ASSERT_EQ(got.sizes(), want.sizes()) << name;
    const double forward_error = relative_max_error(got, want);
    EXPECT_LE(forward_error, 2e-6) << name;
    Tensor go = randn(got.sizes(), &gen);
    auto grads = conv2d_backward(go, x, w, c.p, {true, true, false});
    auto grads64 =
        conv2d_backward(go.to(kFloat64), x.to(kFloat64), w.to(kFloat64), c.p, {true, true, false});
    const double input_grad_error = relative_max_error(std::get<0>(grads), std::get<0>(grads64));
    EXPECT_LE(input_grad_error, 2e-6) << name;
    Tensor input_grad_alone = std::get<0>(conv2d_backward(go, x, w, c.p, {true, false, false}));
    const double alone_error = relative_max_error(input_grad_alone, std::get<0>(grads64));
    EXPECT_LE(alone_error, 2e-6) << name;
    const double weight_grad_error = relative_max_error(std::get<1>(grads), std::get<1>(grads64));
    EXPECT_LE(weight_grad_error, 2e-6) << name;
    worst = std::max({worst, forward_error, input_grad_error, alone_error, weight_grad_error});
    worst_weight_grad = std::max(worst_weight_grad, weight_grad_error);
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("Winograd F(2x2, 3x3): worst max|error| / max|output| = %.3g (weight gradient %.3g)\n",
              worst, worst_weight_grad);
}

TEST(Conv2d, ErrorsNameShapes) {
  try {
    conv2d(ones({1, 3, 5, 5}), ones({4, 2, 3, 3}), Tensor());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expects 2 input channels"), std::string::npos) << e.what();
  }
}

TEST(Pooling, MaxAndAvgMatchPyTorchValues) {
  Tensor x = arange(16, kFloat32).view({1, 1, 4, 4});
  // torch.nn.functional.max_pool2d(x, 3, 2, 1) and avg_pool2d(x, 3, 2, 1) (count_include_pad).
  EXPECT_TRUE(equal(max_pool2d(x, {3, 3}, {2, 2}, {1, 1}), from_vector<float>({5, 7, 13, 15}, {1, 1, 2, 2})));
  EXPECT_TRUE(allclose(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}),
                       from_vector<float>({10.f / 9, 24.f / 9, 51.f / 9, 90.f / 9}, {1, 1, 2, 2})));
  EXPECT_TRUE(allclose(adaptive_avg_pool2d(x, {1, 1}).flatten(), from_vector<float>({7.5f})));
}

TEST(BatchNorm, TrainingNormalisesAndUpdatesRunningStats) {
  Generator gen(1);
  Tensor x = add(mul(randn({8, 2, 3, 3}, &gen), 3.0), 5.0);
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor y = batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
  EXPECT_TRUE(allclose(mean(y, {0, 2, 3}), zeros({2}), 0, 1e-5));
  EXPECT_TRUE(allclose(var(y, {0, 2, 3}, /*unbiased=*/false), ones({2}), 0, 1e-3));
  EXPECT_TRUE(allclose(rm, mul(mean(x, {0, 2, 3}), 0.1), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(rv, add(mul(var(x, {0, 2, 3}), 0.1), 0.9), 1e-5, 1e-6));
}

// The per-channel values are float64 tensors (Note [Per-channel batch-norm values stay on the
// device]): a float64 running_mean must not come back aliased as the saved statistic of eval mode.
TEST(BatchNorm, EvalSavesACopyOfTheRunningMean) {
  Generator gen(2);
  Tensor x = randn({4, 3, 2, 2}, &gen).to(kFloat64);
  Tensor rm = randn({3}, &gen).to(kFloat64), rv = ones({3}, kFloat64);
  const auto [out, saved_mean, saved_invstd] =
      batch_norm_forward(x, Tensor(), Tensor(), rm, rv, /*training=*/false, 0.1, 1e-5);
  const Tensor before = rm.clone();
  copy_(rm, zeros({3}, kFloat64));
  EXPECT_TRUE(equal(saved_mean, before));
  EXPECT_TRUE(allclose(out, mul(sub(x, before.view({1, 3, 1, 1})), 1.0 / std::sqrt(1 + 1e-5))));
}

TEST(LogSoftmax, StableForLargeLogits) {
  Tensor x = from_vector<float>({1000.f, 1000.f, -1000.f}, {1, 3});
  Tensor y = log_softmax(x, 1);
  EXPECT_NEAR(y.select(1, 0).item<float>(), std::log(0.5f), 1e-6);
  EXPECT_TRUE(std::isfinite(y.select(1, 2).item<float>()));
}

}  // namespace
}  // namespace ember
