// The CUDA convolution (im2col + cuBLAS) and batch-norm kernels against the CPU backend, forward
// and backward, over strides, padding, dilation and groups, training and eval, batch norm over
// inputs summed in one and in several parts.
#include <gtest/gtest.h>

#include "tensor/nn_ops.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

class CudaConvBatchNormTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

struct ConvCase {
  Shape input, weight;
  Conv2dParams params;
};

TEST_F(CudaConvBatchNormTest, Conv2dForwardAndBackward) {
  Conv2dParams strided;
  strided.stride = {2, 1};
  strided.padding = {1, 2};
  Conv2dParams dilated;
  dilated.dilation = {2, 2};
  dilated.padding = {2, 2};
  Conv2dParams grouped;
  grouped.groups = 2;
  grouped.padding = {1, 1};
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, Conv2dParams{}},
      {{2, 3, 7, 6}, {5, 3, 3, 2}, strided},
      {{1, 2, 9, 9}, {3, 2, 3, 3}, dilated},
      {{2, 4, 5, 5}, {6, 2, 3, 3}, grouped},
  };
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const ConvCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " input " + shape_to_string(c.input) +
                   " weight " + shape_to_string(c.weight));
      const Tensor x = parity_input(c.input, dt, 1), w = parity_input(c.weight, dt, 2),
                   b = parity_input({c.weight[0]}, dt, 3);
      const Conv2dParams p = c.params;
      EXPECT_TRUE(matches_cpu([&](auto& t) { return conv2d(t[0], t[1], t[2], p); }, {x, w, b},
                              device_tolerance(dt)));
      const Tensor g = parity_input(conv2d(x, w, b, p).sizes(), dt, 4);
      for (int k = 0; k < 3; ++k) {
        // Each gradient sums over many products, in another order than the CPU's.
        EXPECT_TRUE(matches_cpu(
            [&](auto& t) {
              auto grads = conv2d_backward(t[0], t[1], t[2], p, {true, true, true});
              return k == 0 ? std::get<0>(grads) : k == 1 ? std::get<1>(grads) : std::get<2>(grads);
            },
            {g, x, w}, 10 * device_tolerance(dt)))
            << "grad " << k;
      }
    }
  }
}

TEST_F(CudaConvBatchNormTest, BatchNormTrainingAndEval) {
  // Each channel is summed in 1, 3 (37 images: runs of 12, 12 and 13) and 16 parts
  // (Note [Batch-norm sums in parts], tensor/cuda/batch_norm_kernels.cu); and a [N, C] input.
  const std::vector<Shape> shapes = {{4, 3, 5, 6}, {37, 3, 20, 20}, {64, 2, 32, 32}, {300, 3}};
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " input " + shape_to_string(shape));
      const int64_t C = shape[1];
      const Tensor x = parity_input(shape, dt, 5).mul(3).add(1);
      const Tensor w = parity_input({C}, dt, 6), b = parity_input({C}, dt, 7);
      for (bool training : {true, false}) {
        // Running statistics are updated in place: each side starts from its own copy.
        EXPECT_TRUE(matches_cpu(
            [&](auto& t) {
              Tensor rm = t[3].clone(), rv = t[4].clone();
              Tensor out = batch_norm(t[0], t[1], t[2], rm, rv, training, 0.1, 1e-5);
              return cat({out.reshape({-1}), rm, rv});
            },
            {x, w, b, zeros({C}, dt), ones({C}, dt)}, 10 * device_tolerance(dt)))
            << (training ? "training" : "eval");
        const auto fwd = batch_norm_forward(x, w, b, zeros({C}, dt), ones({C}, dt), training,
                                            0.1, 1e-5);
        const Tensor g = parity_input(x.sizes(), dt, 8);
        for (int k = 0; k < 3; ++k) {
          EXPECT_TRUE(matches_cpu(
              [&](auto& t) {
                auto grads = batch_norm_backward(t[0], t[1], t[2], t[3], t[4], training,
                                                 {true, true, true});
                return k == 0 ? std::get<0>(grads)
                              : k == 1 ? std::get<1>(grads) : std::get<2>(grads);
              },
              {g, x, w, std::get<1>(fwd), std::get<2>(fwd)}, 100 * device_tolerance(dt)))
              << "grad " << k << (training ? " training" : " eval");
        }
      }
    }
  }
}

// batch_norm_relu on the device (Note [Batch norm + ReLU], tensor/batch_norm.cc): the device's own
// batch norm then ReLU to the bit, forward and backward, and the CPU's within the tolerance above.
TEST_F(CudaConvBatchNormTest, BatchNormReluIsBatchNormThenRelu) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (training ? " training" : " eval"));
      const Shape shape{37, 3, 20, 20};
      const Tensor x = parity_input(shape, dt, 5).mul(3).add(1).to(kCuda0);
      const Tensor w = parity_input({3}, dt, 6).to(kCuda0), b = parity_input({3}, dt, 7).to(kCuda0);
      const Tensor g = parity_input(shape, dt, 8).to(kCuda0);
      const auto stats = [&] {
        return std::vector<Tensor>{zeros({3}, dt).to(kCuda0), ones({3}, dt).to(kCuda0)};
      };
      std::vector<Tensor> fused_stats = stats(), plain_stats = stats();
      const BatchNormReluForward fused = batch_norm_relu_forward(
          x, w, b, fused_stats[0], fused_stats[1], training, 0.1, 1e-5);
      const auto plain = batch_norm_forward(x, w, b, plain_stats[0], plain_stats[1], training, 0.1,
                                            1e-5);
      const Tensor plain_out = relu_(std::get<0>(plain));
      EXPECT_TRUE(equal(fused.out.cpu(), plain_out.cpu()));
      EXPECT_TRUE(equal(fused_stats[1].cpu(), plain_stats[1].cpu()));
      const auto fused_grads =
          batch_norm_relu_backward(g, x, w, fused, training, {true, true, true});
      const auto plain_grads =
          batch_norm_backward(threshold_backward(g, plain_out, 0), x, w, std::get<1>(plain),
                              std::get<2>(plain), training, {true, true, true});
      EXPECT_TRUE(equal(std::get<0>(fused_grads).cpu(), std::get<0>(plain_grads).cpu()));
      EXPECT_TRUE(equal(std::get<1>(fused_grads).cpu(), std::get<1>(plain_grads).cpu()));
      EXPECT_TRUE(equal(std::get<2>(fused_grads).cpu(), std::get<2>(plain_grads).cpu()));
      EXPECT_TRUE(matches_cpu(
          [&](auto& t) {
            Tensor rm = t[3].clone(), rv = t[4].clone();
            return batch_norm_relu(t[0], t[1], t[2], rm, rv, training, 0.1, 1e-5);
          },
          {x.cpu(), w.cpu(), b.cpu(), zeros({3}, dt), ones({3}, dt)}, 10 * device_tolerance(dt)));
      // With a residual: the device's batch norm, add_ and relu_.
      const Tensor residual = parity_input(shape, dt, 9).to(kCuda0);
      std::vector<Tensor> residual_stats = stats(), plain_residual_stats = stats();
      const Tensor with_residual = batch_norm_relu(x, w, b, residual_stats[0], residual_stats[1],
                                                   training, 0.1, 1e-5, residual);
      Tensor plain_with_residual = batch_norm(x, w, b, plain_residual_stats[0],
                                              plain_residual_stats[1], training, 0.1, 1e-5);
      relu_(plain_with_residual.add_(residual));
      EXPECT_TRUE(equal(with_residual.cpu(), plain_with_residual.cpu()));
    }
  }
}

}  // namespace
}  // namespace ember::testing
