// GELU and scaled dot-product attention against PyTorch float64 values (gen_attention_cases.py),
// gradcheck of attention, and the errors of bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/layers/simple.h"
#include "tensor/all.h"
#include "tests/common/error_matchers.h"

namespace ember {
namespace {

using nn::functional::AttentionOptions;
using nn::functional::scaled_dot_product_attention;

class PyTorchCases : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new nn::StateDict(nn::load("tests/nn/attention_cases.safetensors"));
  }
  static void TearDownTestSuite() { delete cases_; }
  static Tensor get(const std::string& name) {
    for (const auto& [key, t] : *cases_) {
      if (key == name) return t;
    }
    ADD_FAILURE() << "no tensor " << name << " in attention_cases.safetensors";
    return Tensor();
  }
  static double max_relative_error(const Tensor& got, const Tensor& want) {
    EXPECT_EQ(got.sizes(), want.sizes());
    const Tensor err = div(abs(sub(got, want)), add(abs(want), 1e-12));
    return max(err).item<double>();
  }
  // |got - want| over the tensor's largest |want|: for the GELU derivative, which crosses zero
  // near x = -0.75, where an elementwise relative error measures only rounding.
  static double max_error_at_scale(const Tensor& got, const Tensor& want) {
    EXPECT_EQ(got.sizes(), want.sizes());
    return max(abs(sub(got, want))).item<double>() / max(abs(want)).item<double>();
  }
  static nn::StateDict* cases_;
};
nn::StateDict* PyTorchCases::cases_ = nullptr;

TEST_F(PyTorchCases, GeluMatchesPyTorchInBothForms) {
  for (const std::string approximate : {"none", "tanh"}) {
    const std::string p = "gelu_" + approximate + ".";
    Tensor x = get(p + "x").clone();
    x.set_requires_grad(true);
    Tensor y = gelu(x, approximate);
    sum(mul(y, get(p + "w"))).backward();
    EXPECT_LT(max_relative_error(y.detach(), get(p + "out")), 1e-12) << approximate;
    EXPECT_LT(max_error_at_scale(x.grad(), get(p + "grad")), 1e-12) << approximate;
  }
}

TEST_F(PyTorchCases, AttentionMatchesPyTorchPlainCausalAndWide) {
  for (const auto& [name, causal] :
       {std::pair<std::string, bool>{"plain", false}, {"causal", true}, {"causal_wide", true}}) {
    const std::string p = name + ".";
    Tensor q = get(p + "q").clone(), k = get(p + "k").clone(), v = get(p + "v").clone();
    for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
    Tensor y = scaled_dot_product_attention(q, k, v, causal);
    sum(mul(y, get(p + "w"))).backward();
    EXPECT_LT(max_relative_error(y.detach(), get(p + "out")), 1e-10) << name;
    EXPECT_LT(max_relative_error(q.grad(), get(p + "grad_q")), 1e-9) << name;
    EXPECT_LT(max_relative_error(k.grad(), get(p + "grad_k")), 1e-9) << name;
    EXPECT_LT(max_relative_error(v.grad(), get(p + "grad_v")), 1e-9) << name;
  }
}

Tensor input(const Shape& shape, Generator& gen) {
  Tensor t = randn(shape, &gen, kFloat64);
  t.set_requires_grad(true);
  return t;
}

TEST(Attention, PassesGradcheckPlainAndCausal) {
  Generator gen(7);
  for (bool causal : {false, true}) {
    std::vector<Tensor> qkv = {input({2, 2, 4, 3}, gen), input({2, 2, 4, 3}, gen),
                               input({2, 2, 4, 2}, gen)};
    auto result = autograd::gradcheck(
        [causal](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], causal);
        },
        qkv);
    EXPECT_TRUE(result) << (causal ? "causal: " : "plain: ") << result.message;
  }
}

TEST(Attention, CausalQueryIgnoresLaterKeys) {
  Generator gen(3);
  Tensor q = randn({1, 1, 4, 2}, &gen, kFloat64), k = randn({1, 1, 4, 2}, &gen, kFloat64);
  Tensor v = randn({1, 1, 4, 2}, &gen, kFloat64);
  Tensor y = scaled_dot_product_attention(q, k, v, /*is_causal=*/true);
  // The first query sees only the first key: its output is the first value.
  EXPECT_TRUE(allclose(y.select(2, 0), v.select(2, 0)));
  // Changing the last key and value changes nothing before the last query.
  Tensor k2 = k.clone(), v2 = v.clone();
  k2.select(2, 3).fill_(5.0);
  v2.select(2, 3).fill_(-5.0);
  Tensor y2 = scaled_dot_product_attention(q, k2, v2, true);
  EXPECT_TRUE(allclose(y.narrow(2, 0, 3), y2.narrow(2, 0, 3)));
}

TEST(Attention, ScaleOptionAndBroadcastBatch) {
  Generator gen(5);
  Tensor q = randn({2, 3, 4}, &gen, kFloat64), k = randn({3, 4}, &gen, kFloat64);
  Tensor v = randn({3, 2}, &gen, kFloat64);
  AttentionOptions options;
  options.scale = 0.25;
  Tensor y = scaled_dot_product_attention(q, k, v, options);
  Tensor want = matmul(softmax(mul(matmul(q, k.t()), 0.25), -1), v);
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 2}));
  EXPECT_TRUE(allclose(y, want));
}

TEST(Attention, RejectsMismatchedShapesDtypesAndDropout) {
  Tensor q = zeros({1, 2, 4, 8}), k = zeros({1, 2, 4, 6}), v = zeros({1, 2, 4, 8});
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k, v),
                     "query and key must have the same last dim (E), got [1, 2, 4, 8] and [1, 2, 4, 6]");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, q, zeros({1, 2, 5, 8})),
                     "key and value must have the same length (S)");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, q, zeros({1, 2, 4, 8}, kFloat64)),
                     "of one floating dtype");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(zeros({4}), q, q), "need at least 2 dims");
  AttentionOptions options;
  options.dropout_p = 1.0;
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, q, q, options), "dropout_p must be in [0, 1)");
}

TEST(Gelu, ModuleAndErrors) {
  nn::GELU exact, tanh_form("tanh");
  Tensor x = from_vector<float>({-1.0f, 0.0f, 1.0f}, {3});
  EXPECT_NEAR(exact.forward(x)[2].item<float>(), 0.8413447460685429f, 1e-6);
  EXPECT_NEAR(tanh_form.forward(x)[2].item<float>(), 0.8411919906082768f, 1e-6);
  EXPECT_EQ(tanh_form.extra_repr(), "approximate='tanh'");
  EXPECT_EMBER_ERROR(nn::GELU("fast"), "gelu: approximate must be 'none' or 'tanh', got 'fast'");
  EXPECT_EMBER_ERROR(gelu(from_vector<int64_t>({1, 2}, {2})), "gelu: expects a floating tensor");
}

}  // namespace
}  // namespace ember
