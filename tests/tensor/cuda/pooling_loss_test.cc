// The CUDA pooling kernels and the losses on cuda:0 against the CPU backend, forward and backward:
// strides, padding, odd sizes, 3-d and 4-d inputs; log_softmax over each dim; nll_loss with
// ignore_index and every reduction; and the CPU's error for an out-of-range target.
#include <gtest/gtest.h>

#include "nn/functional.h"
#include "tensor/nn_ops.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

class CudaPoolingLossTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

struct PoolCase {
  Shape input;
  Pair kernel, stride, padding;
};

TEST_F(CudaPoolingLossTest, PoolingForwardAndBackward) {
  const std::vector<PoolCase> cases = {{{2, 3, 7, 6}, {2, 2}, {2, 2}, {0, 0}},
                                       {{2, 3, 7, 6}, {3, 3}, {2, 1}, {1, 1}},
                                       {{3, 9, 8}, {3, 2}, {1, 2}, {1, 0}}};
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const PoolCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_to_string(c.input));
      const Tensor x = parity_input(c.input, dt, 1);
      const double tol = device_tolerance(dt);
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) { return max_pool2d(t[0], c.kernel, c.stride, c.padding); }, {x}, 0));
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) {
            return std::get<1>(max_pool2d_with_indices(t[0], c.kernel, c.stride, c.padding));
          },
          {x}, 0));
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) { return avg_pool2d(t[0], c.kernel, c.stride, c.padding); }, {x}, tol));
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) {
            return adaptive_avg_pool2d(t[0], {3, 2});
          },
          {x}, tol));
      const Tensor g_avg =
          parity_input(avg_pool2d(x, c.kernel, c.stride, c.padding).sizes(), dt, 2);
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) { return avg_pool2d_backward(t[0], t[1], c.kernel, c.stride, c.padding); },
          {g_avg, x}, tol));
      const Tensor g_ad = parity_input(adaptive_avg_pool2d(x, {3, 2}).sizes(), dt, 3);
      EXPECT_TRUE(matches_cpu([&](auto& t) { return adaptive_avg_pool2d_backward(t[0], t[1]); },
                              {g_ad, x}, tol));
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) {
            auto [out, idx] = max_pool2d_with_indices(t[1], c.kernel, c.stride, c.padding);
            return max_pool2d_backward(t[0], t[1], idx);
          },
          {g_avg, x}, tol));
    }
  }
}

TEST_F(CudaPoolingLossTest, LogSoftmaxAndNllLoss) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = device_tolerance(dt);
    const Tensor x = parity_input({4, 5, 3}, dt, 4).mul(4);
    for (int64_t dim : {0, 1, 2, -1}) {
      EXPECT_TRUE(matches_cpu([&](auto& t) { return log_softmax(t[0], dim); }, {x}, tol));
    }
    const Tensor logits = parity_input({6, 5}, dt, 5), target = i64({1, 0, 4, -100, 2, 4});
    for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
      EXPECT_TRUE(
          matches_cpu([&](auto& t) { return nll_loss(log_softmax(t[0], 1), t[1], r, -100); },
                      {logits, target}, tol));
      const Tensor g = r == Reduction::kNone ? parity_input({6}, dt, 6) : f64({0.7}).to(dt).view({});
      EXPECT_TRUE(matches_cpu([&](auto& t) { return nll_loss_backward(t[2], t[0], t[1], r, -100); },
                              {log_softmax(logits, 1), target, g}, tol));
    }
    EXPECT_TRUE(matches_cpu(
        [&](auto& t) { return nn::functional::cross_entropy(t[0], t[1], Reduction::kMean, 0.1); },
        {logits, i64({1, 0, 4, 3, 2, 4})}, tol));
  }
}

TEST_F(CudaPoolingLossTest, OutOfRangeTargetIsTheCpuError) {
  const Tensor logits = parity_input({3, 4}, kFloat32, 7).to(kCuda0);
  EXPECT_EMBER_ERROR(
      nll_loss(log_softmax(logits, 1), i64({1, 4, 0}).to(kCuda0), Reduction::kMean, -100),
      "nll_loss: target 4 at position 1 is out of bounds for 4 classes");
}

}  // namespace
}  // namespace ember::testing
