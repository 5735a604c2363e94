// nn/utils/clip_grad: torch.nn.utils.clip_grad_norm_'s total norm (2, 1 and inf), its clamped
// scaling, parameters without gradients, non-finite norms and the refusals.
#include "nn/utils/clip_grad.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tests/common/error_matchers.h"

namespace ember::nn::utils {
namespace {

Tensor param_with_grad(const std::vector<float>& grad) {
  Tensor p = zeros({static_cast<int64_t>(grad.size())});
  p.set_requires_grad(true);
  p.mutable_grad() = from_vector<float>(grad, {static_cast<int64_t>(grad.size())});
  return p;
}

std::vector<float> grad_of(const Tensor& p) {
  Tensor g = p.grad().contiguous();
  return std::vector<float>(g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
}

TEST(ClipGradNormTest, ScalesByMaxNormOverTheTotalTwoNorm) {
  // |[3, 4]| = 5 and |[12]| = 12: the total is |[5, 12]| = 13.
  const Tensor a = param_with_grad({3, 4}), b = param_with_grad({12});
  const Tensor total = clip_grad_norm_({a, b}, 6.5);
  EXPECT_EQ(total.dim(), 0);
  EXPECT_EQ(total.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(total.item<float>(), 13.0f);
  const float coef = static_cast<float>(6.5 / (13.0 + 1e-6));
  EXPECT_EQ(grad_of(a), (std::vector<float>{3 * coef, 4 * coef}));
  EXPECT_EQ(grad_of(b), (std::vector<float>{12 * coef}));
}

TEST(ClipGradNormTest, OneAndInfinityNorms) {
  const Tensor a = param_with_grad({3, -4}), b = param_with_grad({12});
  EXPECT_FLOAT_EQ(clip_grad_norm_({a, b}, 100, {1.0}).item<float>(), 19.0f);  // |3| + |-4| + |12|
  const Tensor c = param_with_grad({3, -4}), d = param_with_grad({2});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FLOAT_EQ(clip_grad_norm_({c, d}, 2, {inf}).item<float>(), 4.0f);
  const float coef = static_cast<float>(2 / (4 + 1e-6));
  EXPECT_EQ(grad_of(c), (std::vector<float>{3 * coef, -4 * coef}));
}

TEST(ClipGradNormTest, WithinMaxNormTheGradientsStayAndParametersWithoutOnesAreLeftOut) {
  const Tensor a = param_with_grad({3, 4});
  Tensor none = zeros({3});
  none.set_requires_grad(true);
  EXPECT_FLOAT_EQ(clip_grad_norm_({none, a}, 100).item<float>(), 5.0f);
  EXPECT_EQ(grad_of(a), (std::vector<float>{3, 4}));
  EXPECT_FALSE(none.grad().defined());
  EXPECT_EQ(clip_grad_norm_({none}, 1).item<float>(), 0.0f);
}

TEST(ClipGradNormTest, ANonFiniteNormIsRefusedOnlyWhenAsked) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor a = param_with_grad({inf, 1});
  EXPECT_EMBER_ERROR(clip_grad_norm_({a}, 1, {2.0, true}),
                     "the total norm of order 2 of the gradients of 1 parameters is inf", "error_if_nonfinite");
  EXPECT_TRUE(std::isinf(clip_grad_norm_({a}, 1).item<float>()));  // PyTorch's: scaled by 1 / inf
  EXPECT_EQ(grad_of(a)[1], 0.0f);
}

TEST(ClipGradNormTest, RefusesWhatItCannotClip) {
  const Tensor a = param_with_grad({1});
  EXPECT_EMBER_ERROR(clip_grad_norm_({a}, -1), "max_norm must be >= 0, got -1");
  EXPECT_EMBER_ERROR(clip_grad_norm_({a}, 1, {0.0}), "norm_type must be positive");
  Tensor d = zeros({1}, kFloat64);
  d.set_requires_grad(true);
  d.mutable_grad() = ones({1}, kFloat64);
  EXPECT_EMBER_ERROR(clip_grad_norm_({a, d}, 1), "parameter 1's gradient is float64[1] on cpu but the first one's is",
                     "must share a dtype and device");
}

}  // namespace
}  // namespace ember::nn::utils
