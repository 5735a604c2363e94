// Random draws on cuda:0 (Philox keyed by the generator): reproducible for a seed, independent of
// other seeds, with the right distribution (moments, range, every integer value hit), for rand,
// randn, randint, uniform_, normal_ and dropout.
#include <gtest/gtest.h>

#include "nn/functional.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

class CudaRandomTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

double mean_of(const Tensor& t) { return mean(t.cpu().to(kFloat64)).item<double>(); }
double var_of(const Tensor& t) { return var(t.cpu().to(kFloat64).reshape({-1})).item<double>(); }

TEST_F(CudaRandomTest, ASeedGivesTheSameTensorAndOtherSeedsDoNot) {
  Generator a(5), b(5), c(6);
  const TensorOptions on_device(kFloat32, kCuda0);
  const Tensor x = rand({1000}, &a, on_device), y = rand({1000}, &b, on_device);
  EXPECT_TRUE(x.is_cuda());
  EXPECT_TRUE(equal(x, y));
  EXPECT_FALSE(equal(x, rand({1000}, &c, on_device)));
  EXPECT_FALSE(equal(rand({1000}, &a, on_device), x)) << "the generator advances";
}

TEST_F(CudaRandomTest, DistributionsHaveTheirMoments) {
  Generator gen(7);
  constexpr int64_t n = 200000;
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor u = rand({n}, &gen, TensorOptions(dt, kCuda0));
    EXPECT_GE(min(u).item<double>(), 0.0);
    EXPECT_LT(max(u).item<double>(), 1.0);
    EXPECT_NEAR(mean_of(u), 0.5, 0.01);
    EXPECT_NEAR(var_of(u), 1.0 / 12, 0.01);
    const Tensor z = randn({n}, &gen, TensorOptions(dt, kCuda0));
    EXPECT_NEAR(mean_of(z), 0.0, 0.02);
    EXPECT_NEAR(var_of(z), 1.0, 0.03);
  }
  const Tensor k = randint(-3, 4, {n}, &gen, TensorOptions(kInt64, kCuda0));
  EXPECT_EQ(min(k).item<int64_t>(), -3);
  EXPECT_EQ(max(k).item<int64_t>(), 3);
  EXPECT_NEAR(mean_of(k), 0.0, 0.03);
}

TEST_F(CudaRandomTest, InPlaceFillsAndDropout) {
  Generator gen(8);
  Tensor t = empty({100000}, TensorOptions(kFloat32, kCuda0));
  uniform_(t, -2.0, 4.0, &gen);
  EXPECT_GE(min(t).item<double>(), -2.0);
  EXPECT_NEAR(mean_of(t), 1.0, 0.05);
  normal_(t, 3.0, 0.5, &gen);
  EXPECT_NEAR(mean_of(t), 3.0, 0.01);
  EXPECT_NEAR(var_of(t), 0.25, 0.01);
  const Tensor x = ones({100000}, TensorOptions(kFloat32, kCuda0));
  const Tensor y = nn::functional::dropout(x, 0.3, /*training=*/true, &gen);
  const double kept = mean_of(gt(y, 0.0).to(kFloat64));
  EXPECT_NEAR(kept, 0.7, 0.01);
  EXPECT_NEAR(max(y).item<double>(), 1.0 / 0.7, 1e-5);
}

}  // namespace
}  // namespace ember::testing
