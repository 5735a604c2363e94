// Gradcheck on cuda:0: every case of the gradcheck table (one per differentiable op) with float64
// inputs on the device, contiguous and strided. The analytic gradients come from the CUDA kernels
// through autograd; the numeric ones perturb the device inputs in place.
#include <gtest/gtest.h>

#include "tests/autograd/gradcheck_cases.h"
#include "tests/tensor/cuda/device_buffer.h"

namespace ember::autograd {
namespace {

const Device kCuda0(DeviceType::kCUDA, 0);

class CudaGradcheckTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaGradcheckTest, ContiguousAndStrided) {
  const Case& c = cases().at(GetParam());
  for (bool non_contiguous : {false, true}) {
    Generator gen(42);
    Inputs inputs;
    for (const Shape& s : c.shapes) {
      inputs.push_back(make_input(s, c.positive, non_contiguous, gen, kCuda0));
    }
    const Tensor out = c.fn(inputs);
    ASSERT_TRUE(out.is_cuda()) << GetParam() << " computed on " << out.device().str();
    GradcheckResult r = gradcheck(c.fn, inputs);
    EXPECT_TRUE(r.ok) << GetParam() << (non_contiguous ? " (non-contiguous)" : "") << ": "
                      << r.message;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, CudaGradcheckTest, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ember::autograd
