// The CUDA reduction kernels against the CPU backend: sum, mean, var, max, min, argmax and argmin
// over all dims, one dim and several, on dense and transposed inputs, at every dtype they take;
// NaN propagation and first-index ties as on the CPU.
#include <gtest/gtest.h>

#include <limits>

#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

class CudaReductionTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }

  // op on a dense [7, 300, 5] input and on a transposed one, at each dtype.
  static void check(const char* name, const Op& op, const std::vector<ScalarType>& dtypes) {
    for (ScalarType dt : dtypes) {
      SCOPED_TRACE(std::string(name) + " " + dtype_name(dt));
      EXPECT_TRUE(matches_cpu(op, {parity_input({7, 300, 5}, dt, 11)}, device_tolerance(dt)));
      EXPECT_TRUE(matches_cpu(op, {parity_input({5, 300, 7}, dt, 12).transpose(0, 2)},
                              device_tolerance(dt)));
    }
  }
};

const std::vector<ScalarType> kNumeric = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                          kInt32,   kInt64,   kUInt8};
const std::vector<ScalarType> kFloating = {kFloat32, kFloat64, kFloat16, kBFloat16};

TEST_F(CudaReductionTest, Sum) {
  check("sum all", [](auto& x) { return sum(x[0]); }, all_dtypes());
  check("sum dim 1", [](auto& x) { return sum(x[0], {1}); }, all_dtypes());
  check("sum dims 0,2 keepdim", [](auto& x) { return sum(x[0], {0, 2}, true); }, kNumeric);
}

TEST_F(CudaReductionTest, MeanAndVar) {
  check("mean", [](auto& x) { return mean(x[0], {1}); }, kFloating);
  check("var", [](auto& x) { return var(x[0], {0, 1}); }, kFloating);
}

TEST_F(CudaReductionTest, MaxMinAndTheirIndices) {
  check("max all", [](auto& x) { return max(x[0]); }, kNumeric);
  check("min all", [](auto& x) { return min(x[0]); }, kNumeric);
  check("max dim", [](auto& x) { return std::get<0>(max(x[0], 1)); }, kNumeric);
  check("argmax dim", [](auto& x) { return argmax(x[0], 1); }, kNumeric);
  check("argmin dim", [](auto& x) { return argmin(x[0], 2, true); }, kNumeric);
  check("argmax all", [](auto& x) { return argmax(x[0]); }, kNumeric);
}

TEST_F(CudaReductionTest, NanPropagatesAndTiesTakeTheFirstIndex) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor t = f64({1, 3, 3, nan, 2, nan, 0, 0}, {2, 4});
  for (const Op& op : std::vector<Op>{[](auto& x) { return argmax(x[0], 1); },
                                      [](auto& x) { return argmin(x[0], 1); },
                                      [](auto& x) { return std::get<0>(max(x[0], 1)); },
                                      [](auto& x) { return sum(x[0], {1}); }}) {
    EXPECT_TRUE(matches_cpu(op, {t}, 0));
  }
}

}  // namespace
}  // namespace ember::testing
