// Table-driven gradcheck: every differentiable op (autograd::differentiable_op_names()) must have a
// case here, run on contiguous and on non-contiguous inputs; many cases also broadcast.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "autograd/functions/function_node.h"
#include "tests/autograd/gradcheck_cases.h"

namespace ember::autograd {
namespace {

class GradcheckTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradcheckTest, ContiguousAndStrided) {
  const Case& c = cases().at(GetParam());
  for (bool non_contiguous : {false, true}) {
    Generator gen(42);
    Inputs inputs;
    for (const Shape& s : c.shapes) inputs.push_back(make_input(s, c.positive, non_contiguous, gen));
    GradcheckResult r = gradcheck(c.fn, inputs);
    EXPECT_TRUE(r.ok) << GetParam() << (non_contiguous ? " (non-contiguous)" : "") << ": " << r.message;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradcheckTest, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

// Adding a differentiable op without a gradcheck case fails here.
TEST(GradcheckCoverage, EveryDifferentiableOpHasACase) {
  std::set<std::string> missing;
  for (const std::string& op : differentiable_op_names()) {
    if (!cases().count(op)) missing.insert(op);
  }
  EXPECT_TRUE(missing.empty()) << "ops without a gradcheck case: " << ::testing::PrintToString(missing);
  std::cout << "gradcheck coverage: " << differentiable_op_names().size() - missing.size() << " / "
            << differentiable_op_names().size() << " differentiable ops\n";
}

// gradcheck itself can fail: detach() hides half of d(x*x)/dx from the analytic gradient.
TEST(GradcheckSelfTest, DetectsAWrongGradient) {
  Generator gen(1);
  Tensor x = randn({3}, &gen, kFloat64);
  x.set_requires_grad(true);
  GradcheckResult r = gradcheck([](const Inputs& in) { return mul(in[0], in[0].detach()); }, {x});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("analytic"), std::string::npos);
}

// Where gradcheck cannot look (a kink, a NaN, an infinite gradient), ReLU's gradient is PyTorch's
// threshold_backward(grad, result, 0) (Note [ReLU backward]): zero where the result is <= 0, the
// incoming gradient elsewhere. Expected values are torch.relu's and torch.relu_'s on the same
// inputs, float32 and float64.
TEST(GradientEdgeCases, ReluBackwardIsThresholdBackward) {
  for (ScalarType dtype : {kFloat32, kFloat64}) {
    for (bool in_place : {false, true}) {
      Tensor x = from_vector<double>({-1.0, 0.0, 2.0, NAN, -0.0, 3.0}).to(dtype);
      x.set_requires_grad(true);
      Tensor grad = from_vector<double>({INFINITY, INFINITY, 3.0, 4.0, NAN, -INFINITY}).to(dtype);
      if (in_place) {
        Tensor y = mul(x, 1.0);
        relu_(y).backward(grad);  // through the returned reference
      } else {
        relu(x).backward(grad);
      }
      const std::vector<double> expected = {0.0, 0.0, 3.0, 4.0, 0.0, -INFINITY};
      const Tensor g = x.grad().to(kFloat64);
      ASSERT_EQ(g.numel(), 6);
      for (int64_t i = 0; i < 6; ++i) {
        EXPECT_EQ(g.data_ptr<double>()[i], expected[i]) << dtype << (in_place ? " relu_" : " relu") << " element " << i;
      }
    }
  }
}

// relu_ saves its result: changing it afterwards is caught at backward, as in PyTorch.
TEST(GradientEdgeCases, ReluInPlaceResultModifiedAfterwardsIsAnError) {
  Tensor x = from_vector<float>({-1.0f, 2.0f});
  x.set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  relu_(y);
  EXPECT_EQ(y.grad_fn()->name(), "ReluBackward");
  y.add_(1.0);
  try {
    sum(y).backward();
    ADD_FAILURE() << "backward through a modified relu_ result did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ReluBackward"), std::string::npos) << e.what();
  }
}

// threshold_backward, relu's one-pass gradient, has no gradient of its own (the engine runs
// formulas under no-grad): it refuses operands that require grad rather than drop their graph.
TEST(GradientEdgeCases, ThresholdBackwardRefusesOperandsThatRequireGrad) {
  Tensor g = from_vector<float>({1.0f, 2.0f});
  g.set_requires_grad(true);
  const Tensor x = from_vector<float>({1.0f, -1.0f});
  try {
    threshold_backward(g, x, 0);
    ADD_FAILURE() << "threshold_backward accepted an operand that requires grad";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("threshold_backward: not differentiable"),
              std::string::npos) << e.what();
  }
  NoGradGuard no_grad;
  const Tensor y = threshold_backward(g, x, 0);
  EXPECT_EQ(y.data_ptr<float>()[0], 1.0f);
  EXPECT_EQ(y.data_ptr<float>()[1], 0.0f);
}

// mul_out, an out= form (DDP's scaled copy into a bucket), is not differentiable either: it refuses
// an operand that requires grad while grad mode is on, as PyTorch's out= forms do.
TEST(GradientEdgeCases, MulOutRefusesOperandsThatRequireGrad) {
  Tensor x = from_vector<float>({1.0f, 2.0f});
  x.set_requires_grad(true);
  Tensor out = zeros({2});
  try {
    mul_out(out, x, 2.0);
    ADD_FAILURE() << "mul_out accepted an operand that requires grad";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul_out: not differentiable"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("self float32[2] on cpu has requires_grad=true"), std::string::npos)
        << e.what();
  }
  NoGradGuard no_grad;
  mul_out(out, x, 2.0);
  EXPECT_EQ(out.data_ptr<float>()[1], 4.0f);
}

// Every slot the tensor library exposes to autograd is filled (no op silently loses its graph).
TEST(GradcheckCoverage, EveryAutogradSlotIsRegistered) {
  const std::vector<bool> filled = autograd_slots_filled(autograd_kernels());
  ASSERT_EQ(filled.size(), autograd_slot_names().size());
  for (size_t i = 0; i < filled.size(); ++i) {
    EXPECT_TRUE(filled[i]) << "autograd slot '" << autograd_slot_names()[i] << "' is empty";
  }
}

}  // namespace
}  // namespace ember::autograd
