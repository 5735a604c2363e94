// batch_norm_relu against relu_(batch_norm(...)) (Note [Batch norm + ReLU], tensor/batch_norm.cc):
// the same output, running statistics and gradients to the bit, at this suite's capability level,
// in training and eval, float32 and float64, rows shorter and longer than a vector, 1 and 2
// threads; and its errors.
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tensor/nn_ops.h"
#include "tensor/parallel.h"
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

struct Case {
  Shape shape;
  ScalarType dtype;
  bool training;
  int threads;
};

std::string describe(const Case& c) {
  return shape_to_string(c.shape) + (c.dtype == kFloat32 ? " float32" : " float64") +
         (c.training ? " training" : " eval") + ", " + std::to_string(c.threads) + " thread(s)";
}

// Every element of `actual` has the bits of `expected`'s (NaN payloads included).
void expect_same_bits(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined() && expected.defined()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  const Tensor a = actual.contiguous(), e = expected.contiguous();
  if (std::memcmp(a.data_ptr(), e.data_ptr(), a.nbytes()) == 0) return;
  const std::vector<double> av = testing::values(a), ev = testing::values(e);
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::memcmp(&av[i], &ev[i], sizeof(double)) != 0) {
      ADD_FAILURE() << what << ": element " << i << " is " << av[i] << ", expected " << ev[i];
      return;
    }
  }
}

// One layer's inputs and what a step through it produced.
struct StepResult {
  Tensor out, running_mean, running_var, grad_input, grad_weight, grad_bias;
};

class BatchNormReluTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    Generator gen(7);
    const int64_t C = c.shape[1];
    // Shifted so that about a third of the outputs are negative, and one element NaN in eval
    // (in training it would make its channel's statistics NaN): ReLU keeps it, its mask passes
    // the gradient.
    input_ = (randn(c.shape, &gen) * 1.7 + 0.4).to(c.dtype);
    if (!c.training) {
      input_.view({-1}).select(0, 5).fill_(Scalar(NAN));
    }
    weight_ = (rand({C}, &gen) + 0.5).to(c.dtype);
    bias_ = (randn({C}, &gen) * 0.3).to(c.dtype);
    // The last channel has weight 0 and bias 0 in eval, so its outputs are exactly 0 (or -0).
    if (!c.training) {
      weight_.select(0, C - 1).fill_(Scalar(0.0));
      bias_.select(0, C - 1).fill_(Scalar(0.0));
    }
    running_mean_ = randn({C}, &gen) * 0.2;
    running_var_ = rand({C}, &gen) + 0.5;
    grad_ = randn(c.shape, &gen).to(c.dtype);
  }

  // One step through the layer: the raw forward and backward (autograd's formulas call these;
  // tests/autograd's gradcheck covers the recorded op), fused or as batch_norm then ReLU.
  StepResult step(bool fused) {
    const Case& c = GetParam();
    set_num_threads(c.threads);
    StepResult r{Tensor(), running_mean_.clone(), running_var_.clone()};
    std::tuple<Tensor, Tensor, Tensor> grads;
    if (fused) {
      const BatchNormReluForward f = batch_norm_relu_forward(
          input_, weight_, bias_, r.running_mean, r.running_var, c.training, 0.1, 1e-5);
      r.out = f.out;
      grads = batch_norm_relu_backward(grad_, input_, weight_, f, c.training, {true, true, true});
    } else {
      auto [out, mean, invstd] = batch_norm_forward(input_, weight_, bias_, r.running_mean,
                                                    r.running_var, c.training, 0.1, 1e-5);
      r.out = relu_(out);
      grads = batch_norm_backward(threshold_backward(grad_, r.out, 0), input_, weight_, mean,
                                  invstd, c.training, {true, true, true});
    }
    std::tie(r.grad_input, r.grad_weight, r.grad_bias) = grads;
    set_num_threads(1);
    return r;
  }

  Tensor input_, weight_, bias_, running_mean_, running_var_, grad_;
};

TEST_P(BatchNormReluTest, SameBitsAsBatchNormThenRelu) {
  const StepResult fused = step(true), separate = step(false);
  const std::string what = describe(GetParam());
  expect_same_bits(fused.out, separate.out, what + ", output");
  expect_same_bits(fused.running_mean, separate.running_mean, what + ", running_mean");
  expect_same_bits(fused.running_var, separate.running_var, what + ", running_var");
  expect_same_bits(fused.grad_input, separate.grad_input, what + ", grad_input");
  expect_same_bits(fused.grad_weight, separate.grad_weight, what + ", grad_weight");
  expect_same_bits(fused.grad_bias, separate.grad_bias, what + ", grad_bias");
}

// The comparison above can fail: ReLU zeroed outputs, and its mask changed the gradients from
// batch norm's own.
// With a residual: batch_norm, add_ and relu_'s bits (the backward is threshold_backward on the
// output and batch_norm_backward, autograd's formula; tests/nn checks it through BatchNorm2d).
TEST_P(BatchNormReluTest, ResidualIsAddedBeforeRelu) {
  const Case& c = GetParam();
  set_num_threads(c.threads);
  Generator gen(11);
  const Tensor residual = randn(c.shape, &gen).to(c.dtype);
  Tensor rm = running_mean_.clone(), rv = running_var_.clone();
  const BatchNormReluForward fused = batch_norm_relu_forward(input_, weight_, bias_, rm, rv,
                                                             c.training, 0.1, 1e-5, residual);
  Tensor plain_rm = running_mean_.clone(), plain_rv = running_var_.clone();
  Tensor plain = std::get<0>(batch_norm_forward(input_, weight_, bias_, plain_rm, plain_rv,
                                                c.training, 0.1, 1e-5));
  relu_(plain.add_(residual));
  set_num_threads(1);
  expect_same_bits(fused.out, plain, describe(c) + ", output with a residual");
  expect_same_bits(rv, plain_rv, describe(c) + ", running_var with a residual");
  EXPECT_FALSE(fused.relu_scale.defined()) << "the backward masks by the output instead";
  // A strided residual is read as its values.
  const Tensor strided = residual.transpose(2, 3).contiguous().transpose(2, 3);
  Tensor rm2 = running_mean_.clone(), rv2 = running_var_.clone();
  expect_same_bits(batch_norm_relu_forward(input_, weight_, bias_, rm2, rv2, c.training, 0.1, 1e-5,
                                           strided)
                       .out,
                   plain, describe(c) + ", output with a strided residual");
}

TEST_P(BatchNormReluTest, ReluZeroesOutputsAndMasksGradients) {
  const Case& c = GetParam();
  const StepResult fused = step(true);
  const std::vector<double> out = testing::values(fused.out);
  int64_t zeros = 0;
  for (double v : out) zeros += v == 0.0;
  EXPECT_GT(zeros, static_cast<int64_t>(out.size()) / 10) << describe(c);
  const auto plain_forward = batch_norm_forward(input_, weight_, bias_, running_mean_.clone(),
                                                running_var_.clone(), c.training, 0.1, 1e-5);
  const Tensor plain = std::get<0>(
      batch_norm_backward(grad_, input_, weight_, std::get<1>(plain_forward),
                          std::get<2>(plain_forward), c.training, {true, false, false}));
  EXPECT_FALSE(equal(plain, fused.grad_input)) << describe(c);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const Shape& shape : {Shape{5, 3, 7, 9}, Shape{8, 16, 14, 14}, Shape{3, 4, 1, 3}}) {
    for (ScalarType dtype : {kFloat32, kFloat64}) {
      for (bool training : {true, false}) {
        for (int threads : {1, 2}) out.push_back({shape, dtype, training, threads});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormReluTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string name = describe(info.param);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(BatchNormReluErrors, BackwardNeedsTheForwardsScaleAndShift) {
  Tensor x = randn({2, 3, 4}), w = ones({3});
  BatchNormReluForward forward = batch_norm_relu_forward(x, w, Tensor(), Tensor(), Tensor(), true,
                                                         0.1, 1e-5);
  BatchNormReluForward without = forward;
  without.relu_scale = Tensor();
  EXPECT_EMBER_ERROR(batch_norm_relu_backward(x, x, w, without, true, {true, true, true}),
                     "batch_norm_relu_backward: needs the scale and shift");
  BatchNormReluForward wrong = forward;
  wrong.relu_shift = zeros({4}, kFloat64);
  EXPECT_EMBER_ERROR(batch_norm_relu_backward(x, x, w, wrong, true, {true, true, true}),
                     "batch_norm_relu_backward", "must have 3 elements");
}

TEST(BatchNormReluErrors, ResidualMustMatchTheInput) {
  const Tensor x = randn({2, 3, 4});
  EXPECT_EMBER_ERROR(batch_norm_relu(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5,
                                     randn({2, 3, 5})),
                     "batch_norm_relu: residual float32[2, 3, 5]", "input's shape");
  EXPECT_EMBER_ERROR(batch_norm_relu(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5,
                                     randn({2, 3, 4}).to(kFloat64)),
                     "batch_norm_relu: residual", "dtype");
}

TEST(BatchNormReluErrors, ForwardChecksAsBatchNorm) {
  EXPECT_EMBER_ERROR(batch_norm_relu(randn({2, 3}).to(kInt64), Tensor(), Tensor(), Tensor(),
                                     Tensor(), true, 0.1, 1e-5),
                     "batch_norm: supports float32 and float64");
  EXPECT_EMBER_ERROR(batch_norm_relu(randn({2, 3}), ones({4}), Tensor(), Tensor(), Tensor(), true,
                                     0.1, 1e-5),
                     "must have 3 elements");
}

}  // namespace
}  // namespace ember
