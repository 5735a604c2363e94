// fused_sgd_'s CUDA kernel (Note [Fused SGD], tensor/fused_sgd.cc): on cuda:0 it gives the bits of
// SGD's update as tensor ops on the same device, and the CPU's values within the device tolerance.
#include <cstring>

#include <gtest/gtest.h>

#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"
#include "tests/optim/optim_test_util.h"

namespace ember::testing {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.cpu(), y = b.cpu();
  return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

class CudaFusedSgd : public ::testing::TestWithParam<ScalarType> {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaFusedSgd, SameBitsAsTheTensorOpsAndTheCpuValues) {
  NoGradGuard no_grad;
  const ScalarType dtype = GetParam();
  const SgdHyperparameters cases[] = {
      {0.1, 0, 0, 0, false}, {0.1, 0.9, 0.1, 5e-4, false}, {0.3, 0.7, 0, 1e-3, true}};
  const Shape shapes[] = {{1}, {300}, {16, 16, 3, 3}};
  for (const SgdHyperparameters& h : cases) {
    SCOPED_TRACE(::testing::Message() << "lr " << h.lr << " momentum " << h.momentum);
    std::vector<SgdParameter> fused, fused_cpu;
    std::vector<Tensor> params, bufs(std::size(shapes));
    uint64_t seed = 1;
    for (const Shape& shape : shapes) {
      const Tensor p = parity_input(shape, dtype, seed++);
      fused.push_back({p.to(kCuda0), Tensor(), Tensor(), false});
      fused_cpu.push_back({p.clone(), Tensor(), Tensor(), false});
      params.push_back(p.to(kCuda0));
    }
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < fused.size(); ++i) {
        const Tensor grad = parity_input(fused[i].param.sizes(), dtype, 100 * step + i);
        fused[i].grad = grad.to(kCuda0);
        fused_cpu[i].grad = grad;
        if (h.momentum != 0) {
          fused[i].first_step = fused_cpu[i].first_step = step == 0;
          if (step == 0) {
            fused[i].momentum_buffer = empty(grad.sizes(), TensorOptions(dtype, kCuda0));
            fused_cpu[i].momentum_buffer = empty(grad.sizes(), TensorOptions(dtype));
          }
        }
        optim::testing::sgd_op_by_op(params[i], fused[i].grad, bufs[i], h);
      }
      fused_sgd_(fused, h);
      fused_sgd_(fused_cpu, h);
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(same_bits(fused[i].param, params[i])) << "step " << step << ", parameter " << i;
        if (h.momentum != 0) {
          ASSERT_TRUE(same_bits(fused[i].momentum_buffer, bufs[i])) << "step " << step;
        }
        EXPECT_TRUE(tensor_is(fused[i].param.cpu(), fused_cpu[i].param.sizes(),
                              values(fused_cpu[i].param), device_tolerance(dtype)));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaFusedSgd, ::testing::Values(kFloat32, kFloat64));

TEST(CudaFusedSgdErrors, ParametersOnTwoDevicesAreRefused) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  NoGradGuard no_grad;
  const Tensor cpu = zeros({2}), cuda = zeros({2}, TensorOptions(kFloat32, kCuda0));
  EXPECT_THROW(fused_sgd_({{cuda, ones({2}).to(kCuda0), Tensor(), false},
                           {cpu, ones({2}), Tensor(), false}},
                          {}),
               Error);
}

}  // namespace
}  // namespace ember::testing
