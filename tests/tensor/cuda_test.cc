// The CUDA backend against the CPU: device round trips, add/sub/mul/div/neg/relu parity, and the
// "no CUDA kernel for <op>" errors. Every case skips (with a reason) when no GPU can be used: in the
// default build no backend is linked; under --config=cuda on a machine without a driver or GPU
// cuda_is_available() is false too.
#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tensor/kernels.h"
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

const Device kCuda(DeviceType::kCUDA, 0);

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_device_backend(DeviceType::kCUDA)) {
      GTEST_SKIP() << "ember was built without CUDA (build with --config=cuda to run these)";
    }
    if (!cuda_is_available()) {
      GTEST_SKIP() << "CUDA backend linked, but no usable GPU (no driver or no device)";
    }
  }

  static Tensor input(const Shape& shape, uint64_t seed) {
    Generator gen(seed);
    return randn(shape, &gen);
  }
};

TEST_F(CudaTest, RoundTripKeepsValuesShapeAndDtype) {
  for (ScalarType dt : {kFloat32, kFloat64, kInt64, kFloat16, kBool}) {
    Tensor cpu = input({3, 5}, 1).to(dt);
    Tensor gpu = cpu.to(kCuda);
    EXPECT_TRUE(gpu.is_cuda());
    EXPECT_EQ(gpu.sizes(), cpu.sizes());
    EXPECT_EQ(gpu.dtype(), dt);
    EXPECT_TRUE(equal(gpu.to(kCPU), cpu)) << dtype_name(dt);
  }
}

TEST_F(CudaTest, StridedAndDeviceToDeviceCopies) {
  Tensor cpu = input({4, 6}, 2);
  Tensor gpu = cpu.t().to(kCuda);  // a strided source is made dense on the CPU first
  EXPECT_TRUE(equal(gpu.cpu(), cpu.t().contiguous()));
  Tensor again = gpu.clone();  // device to device
  EXPECT_FALSE(again.is_alias_of(gpu));
  EXPECT_TRUE(equal(again.cpu(), cpu.t().contiguous()));
  Tensor z = gpu.clone();
  z.zero_();
  EXPECT_TRUE(equal(z.cpu(), zeros({6, 4})));
}

TEST_F(CudaTest, EmptyTensorsRoundTrip) {
  Tensor gpu = empty({0, 3}, TensorOptions(kFloat32, kCuda));
  EXPECT_EQ(gpu.cpu().numel(), 0);
}

TEST_F(CudaTest, BinaryOpsMatchCpu) {
  Tensor a = input({7, 33}, 3), b = input({7, 33}, 4).abs().add(0.5);
  Tensor ga = a.to(kCuda), gb = b.to(kCuda);
  EXPECT_TRUE(allclose(add(ga, gb).cpu(), add(a, b)));
  EXPECT_TRUE(allclose(add(ga, gb, 2.5).cpu(), add(a, b, 2.5)));
  EXPECT_TRUE(allclose(sub(ga, gb).cpu(), sub(a, b)));
  EXPECT_TRUE(allclose(mul(ga, gb).cpu(), mul(a, b)));
  EXPECT_TRUE(allclose(div(ga, gb).cpu(), div(a, b)));
}

TEST_F(CudaTest, InPlaceAddMatchesCpu) {
  Tensor a = input({1000}, 5), b = input({1000}, 6);
  Tensor ga = a.to(kCuda);
  ga.add_(b.to(kCuda));
  EXPECT_TRUE(allclose(ga.cpu(), a + b));
}

TEST_F(CudaTest, UnaryOpsMatchCpu) {
  Tensor a = input({5, 200}, 7);
  Tensor ga = a.to(kCuda);
  EXPECT_TRUE(equal(relu(ga).cpu(), relu(a)));
  EXPECT_TRUE(equal(neg(ga).cpu(), neg(a)));
}

TEST_F(CudaTest, LargeTensorCoversEveryElement) {
  Tensor a = input({1 << 21}, 8);  // more elements than one grid pass
  EXPECT_TRUE(equal(relu(a.to(kCuda)).cpu(), relu(a)));
}

TEST_F(CudaTest, AnEmptySlotNamesTheOpAndOperands) {
  // Every slot is filled (kernel_coverage_test); empty one for the length of this test.
  KernelTable& table = kernel_table(DeviceType::kCUDA);
  const auto saved = table.unary;
  table.unary = nullptr;
  Tensor ga = input({2, 3}, 9).to(kCuda);
  EXPECT_EMBER_ERROR(exp(ga), "no CUDA kernel for exp", "float32[2, 3] on cuda:0");
  table.unary = saved;
  EXPECT_TRUE(allclose(exp(ga).cpu(), exp(ga.cpu())));
}

TEST_F(CudaTest, MixingDevicesIsAnError) {
  Tensor a = input({2, 3}, 11);
  EXPECT_EMBER_ERROR(add(a, a.to(kCuda)), "add", "same device", "cpu", "cuda:0");
}

// Runs with or without a GPU: the skip logic itself must hold.
TEST(CudaAvailability, CountIsZeroWithoutBackendOrDevice) {
  if (!has_device_backend(DeviceType::kCUDA)) {
    EXPECT_FALSE(cuda_is_available());
    EXPECT_EQ(cuda_device_count(), 0);
  }
  EXPECT_EQ(cuda_is_available(), cuda_device_count() > 0);
}

}  // namespace
}  // namespace ember
