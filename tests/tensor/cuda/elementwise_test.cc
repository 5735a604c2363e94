// The CUDA elementwise kernels against the CPU backend, op by op and dtype by dtype, on dense,
// transposed (strided) and broadcast operands: binary arithmetic and comparisons, unary math,
// clamp, where, dtype-converting and strided copies, and fills.
#include <gtest/gtest.h>

#include "tensor/nn_ops.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  const char* name;
  Op op;
  int inputs;            // operands drawn from parity_input
  bool positive = false; // operands > 0
  bool floating_only = false;
  bool numeric_only = false;  // not bool
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"add", [](auto& x) { return add(x[0], x[1]); }, 2},
      {"add_alpha", [](auto& x) { return add(x[0], x[1], 3); }, 2, false, false, true},
      {"sub", [](auto& x) { return sub(x[0], x[1]); }, 2, false, false, true},
      {"mul", [](auto& x) { return mul(x[0], x[1]); }, 2},
      {"div", [](auto& x) { return div(x[0], x[1]); }, 2, true},
      {"pow", [](auto& x) { return pow(x[0], x[1]); }, 2, true, false, true},
      {"maximum", [](auto& x) { return maximum(x[0], x[1]); }, 2},
      {"minimum", [](auto& x) { return minimum(x[0], x[1]); }, 2},
      {"threshold_backward", [](auto& x) { return threshold_backward(x[0], x[1], 0.5); }, 2,
       false, false, true},
      {"eq", [](auto& x) { return eq(x[0], x[1]); }, 2},
      {"ne", [](auto& x) { return ne(x[0], x[1]); }, 2},
      {"lt", [](auto& x) { return lt(x[0], x[1]); }, 2},
      {"le", [](auto& x) { return le(x[0], x[1]); }, 2},
      {"gt", [](auto& x) { return gt(x[0], x[1]); }, 2},
      {"ge", [](auto& x) { return ge(x[0], x[1]); }, 2},
      {"neg", [](auto& x) { return neg(x[0]); }, 1, false, false, true},
      {"abs", [](auto& x) { return abs(x[0]); }, 1, false, false, true},
      {"relu", [](auto& x) { return relu(x[0]); }, 1, false, false, true},
      {"sign", [](auto& x) { return sign(x[0]); }, 1, false, false, true},
      {"exp", [](auto& x) { return exp(x[0]); }, 1, false, true},
      {"log", [](auto& x) { return log(x[0]); }, 1, true, true},
      {"sqrt", [](auto& x) { return sqrt(x[0]); }, 1, true, true},
      {"rsqrt", [](auto& x) { return rsqrt(x[0]); }, 1, true, true},
      {"sigmoid", [](auto& x) { return sigmoid(x[0]); }, 1, false, true},
      {"tanh", [](auto& x) { return tanh(x[0]); }, 1, false, true},
      {"gelu", [](auto& x) { return gelu(x[0]); }, 1, false, true},
      {"gelu_tanh", [](auto& x) { return gelu(x[0], "tanh"); }, 1, false, true},
      {"gelu_backward",
       [](auto& x) { return gelu_backward(x[0], x[1], GeluApproximation::kNone); }, 2, false, true},
      {"gelu_tanh_backward",
       [](auto& x) { return gelu_backward(x[0], x[1], GeluApproximation::kTanh); }, 2, false, true},
      {"clamp", [](auto& x) { return clamp(x[0], Scalar(-1), Scalar(2)); }, 1, false, false, true},
      {"clamp_min", [](auto& x) { return clamp(x[0], Scalar(0), std::nullopt); }, 1, false, false,
       true},
      {"where", [](auto& x) { return where(gt(x[0], x[1]), x[0], x[1]); }, 2},
      {"to_float32", [](auto& x) { return x[0].to(kFloat32); }, 1},
      {"to_int64", [](auto& x) { return x[0].to(kInt64); }, 1},
      {"to_bool", [](auto& x) { return x[0].to(kBool); }, 1},
      {"to_float16", [](auto& x) { return x[0].to(kFloat16); }, 1},
      {"to_bfloat16", [](auto& x) { return x[0].to(kBFloat16); }, 1},
      {"fill", [](auto& x) { return full_like(x[0], 3); }, 1},
      {"add_inplace", [](auto& x) {
         Tensor y = x[0].clone();
         y.add_(x[1]);
         return y;
       }, 2},
  };
  return all;
}

enum class Layout { kDense, kTransposed, kBroadcast };

struct Param {
  size_t case_index;
  ScalarType dtype;
  Layout layout;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const char* layouts[] = {"dense", "transposed", "broadcast"};
  return std::string(cases()[info.param.case_index].name) + "_" + dtype_name(info.param.dtype) +
         "_" + layouts[static_cast<int>(info.param.layout)];
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (size_t c = 0; c < cases().size(); ++c) {
    for (ScalarType dt : all_dtypes()) {
      if (cases()[c].floating_only && !is_floating_point(dt)) continue;
      if (cases()[c].numeric_only && dt == kBool) continue;
      for (Layout l : {Layout::kDense, Layout::kTransposed, Layout::kBroadcast}) {
        if (l == Layout::kBroadcast && cases()[c].inputs < 2) continue;
        out.push_back({c, dt, l});
      }
    }
  }
  return out;
}

class CudaElementwiseTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaElementwiseTest, MatchesCpu) {
  const Case& c = cases()[GetParam().case_index];
  const ScalarType dt = GetParam().dtype;
  std::vector<Tensor> inputs;
  for (int i = 0; i < c.inputs; ++i) {
    Tensor t;
    switch (GetParam().layout) {
      case Layout::kDense: t = parity_input({37, 29}, dt, 100 + i, c.positive); break;
      case Layout::kTransposed: t = parity_input({29, 37}, dt, 100 + i, c.positive).t(); break;
      case Layout::kBroadcast:
        t = i == 0 ? parity_input({37, 29}, dt, 100 + i, c.positive)
                   : parity_input({29}, dt, 100 + i, c.positive);
        break;
    }
    inputs.push_back(t);
  }
  EXPECT_TRUE(matches_cpu(c.op, inputs, device_tolerance(dt)));
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaElementwiseTest, ::testing::ValuesIn(all_params()), param_name);

TEST(CudaCopyTest, StridedCopiesBetweenDevicesKeepLayoutSemantics) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  Tensor cpu = parity_input({6, 8}, kFloat32, 1);
  Tensor gpu = cpu.to(kCuda0);
  // Device -> device into a transposed view, then back to a strided CPU view.
  Tensor target = zeros({8, 6}, TensorOptions(kFloat64, kCuda0));
  target.t().copy_(gpu);
  EXPECT_TRUE(equal(target.cpu(), cpu.to(kFloat64).t().contiguous()));
  Tensor back = zeros({8, 6}, kFloat16);
  back.t().copy_(gpu);
  EXPECT_TRUE(equal(back, cpu.to(kFloat16).t().contiguous()));
  // A broadcast source lands whole.
  Tensor row = parity_input({8}, kFloat32, 2);
  Tensor dst = empty({5, 8}, TensorOptions(kFloat32, kCuda0));
  dst.copy_(row);
  EXPECT_TRUE(equal(dst.cpu(), row.expand({5, 8}).contiguous()));
}

}  // namespace
}  // namespace ember::testing
