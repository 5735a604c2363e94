// Module bookkeeping (registration order, recursion, tied-parameter de-dup, buffers, train/eval,
// zero_grad, to(dtype), state_dict round trip and its errors) and the layers' shapes and inits.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/nn.h"
#include "tensor/all.h"
#include "tests/common/error_matchers.h"

namespace ember::nn {
namespace {

using ::testing::HasSubstr;

using ::ember::testing::error_of;

struct Tied : Module {
  std::shared_ptr<Linear> a, b;
  Tied() : Module("Tied") {
    a = register_module("a", std::make_shared<Linear>(3, 3));
    b = register_module("b", std::make_shared<Linear>(3, 3, false));
    // b shares a's weight (tied parameters).
    b->weight() = a->weight();
  }
};

TEST(Module, NamedParametersRecurseInOrderAndDeduplicateSharedOnes) {
  auto m = std::make_shared<Tied>();
  auto names = m->named_parameters();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "a.weight");
  EXPECT_EQ(names[1].first, "a.bias");
  // The state dict keeps every name, as in PyTorch.
  EXPECT_EQ(m->state_dict().size(), 3u);
}

// PyTorch's .to() converts .data in place, so tied parameters stay one tensor; so do ember's.
TEST(Module, ToKeepsTiedParametersTied) {
  auto m = std::make_shared<Tied>();
  m->to(kFloat64);
  EXPECT_EQ(m->a->weight().dtype(), kFloat64);
  EXPECT_EQ(m->a->weight().unsafe_impl(), m->b->weight().unsafe_impl());
  EXPECT_EQ(m->named_parameters().size(), 2u);
  EXPECT_TRUE(m->b->weight().requires_grad());
}

TEST(Module, BuffersModulesTrainEval) {
  auto net = std::make_shared<Sequential>(std::vector<ModulePtr>{
      std::make_shared<Conv2d>(1, 2, 3), std::make_shared<BatchNorm2d>(2), std::make_shared<ReLU>()});
  auto bufs = net->named_buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0].first, "1.running_mean");
  EXPECT_EQ(bufs[2].first, "1.num_batches_tracked");
  EXPECT_EQ(net->named_modules().size(), 4u);
  net->eval();
  EXPECT_FALSE((*net)[1]->is_training());
  net->train();
  EXPECT_TRUE((*net)[1]->is_training());
}

// replace_module swaps a registered child (names and order kept); redirect_forward routes a
// BatchNorm2d's forward to another module (Note [Converted BatchNorm]).
TEST(Module, ReplaceModuleAndRedirectForward) {
  auto net = std::make_shared<Sequential>(
      std::vector<ModulePtr>{std::make_shared<BatchNorm2d>(2), std::make_shared<ReLU>()});
  auto bn = std::dynamic_pointer_cast<BatchNorm2d>((*net)[0]);
  net->replace_module("0", std::make_shared<Flatten>());
  EXPECT_EQ(net->named_children()[0].second->type_name(), "Flatten");
  EXPECT_TRUE(net->named_buffers().empty());
  EXPECT_THROW(
      {
        try {
          net->replace_module("7", std::make_shared<ReLU>());
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr("Sequential: replace_module: no child module named '7'"));
          throw;
        }
      },
      Error);
  Tensor x = sub(full({1, 2, 1, 1}, Scalar(3.0)), 5.0);
  bn->redirect_forward(std::make_shared<ReLU>());
  EXPECT_TRUE(allclose(bn->forward(x), zeros({1, 2, 1, 1})));  // ReLU's result, not BatchNorm's
  EXPECT_THROW(bn->redirect_forward(bn), Error);
}

TEST(Module, StateDictRoundTripAndErrors) {
  Generator g1(1), g2(2);
  auto a = make_mlp({4, 8, 2}, &g1);
  auto b = make_mlp({4, 8, 2}, &g2);
  EXPECT_FALSE(allclose(a->parameters()[0], b->parameters()[0]));
  b->load_state_dict(a->state_dict());
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(equal(a->parameters()[i], b->parameters()[i]));
  }
  StateDict sd = a->state_dict();
  sd.erase(sd.begin());
  sd.emplace_back("extra.weight", zeros({1}));
  const std::string msg = error_of([&] { b->load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("missing key(s): \"0.weight\""));
  EXPECT_THAT(msg, HasSubstr("unexpected key(s): \"extra.weight\""));
  b->load_state_dict(sd, /*strict=*/false);  // non-strict ignores both
  auto c = make_mlp({4, 9, 2});
  EXPECT_THAT(error_of([&] { c->load_state_dict(a->state_dict()); }),
              HasSubstr("0.weight: checkpoint has shape [8, 4], the model has [9, 4]"));
}

TEST(Module, ZeroGradAndToDtype) {
  auto lin = std::make_shared<Linear>(2, 1);
  sum(lin->forward(ones({3, 2}))).backward();
  ASSERT_TRUE(lin->weight().grad().defined());
  lin->zero_grad(false);
  EXPECT_TRUE(equal(lin->weight().grad(), zeros({1, 2})));
  lin->zero_grad();
  EXPECT_FALSE(lin->weight().grad().defined());
  lin->to(kFloat64);
  EXPECT_EQ(lin->weight().dtype(), kFloat64);
  EXPECT_TRUE(lin->weight().requires_grad());
}

TEST(Init, LinearAndConvDefaultBoundsMatchPyTorch) {
  Generator g(0);
  Linear lin(100, 50, true, &g);
  const double bound = 1.0 / std::sqrt(100.0);  // kaiming_uniform(a=sqrt(5)) on fan_in 100
  EXPECT_LE(max(abs(lin.weight())).item<double>(), bound);
  EXPECT_GT(max(abs(lin.weight())).item<double>(), 0.9 * bound);
  // U(-b, b) has variance b^2 / 3.
  EXPECT_NEAR(var(lin.weight().flatten()).item<double>(), bound * bound / 3, 0.1 * bound * bound / 3);
  Conv2d conv(4, 8, 3, 1, 1, true, &g);
  const double cb = 1.0 / std::sqrt(4.0 * 9.0);
  EXPECT_LE(max(abs(conv.weight())).item<double>(), cb);
}

TEST(Layers, ShapesAndModes) {
  Generator g(3);
  Tensor x = randn({2, 1, 28, 28}, &g);
  ResNet net(ResNetOptions{20, 16, 1, 10}, &g);
  EXPECT_EQ(net.forward(x).sizes(), Shape({2, 10}));
  EXPECT_EQ(net.parameters().size(), 65u);  // 19 convs + 19 BN x2 + fc x2 + 2 projection convs
  MaxPool2d pool({2, 2});
  EXPECT_EQ(pool.forward(x).sizes(), Shape({2, 1, 14, 14}));
  Dropout drop(0.5, &g);
  drop.eval();
  EXPECT_TRUE(equal(drop.forward(x), x));
  Embedding emb(10, 4, /*sparse=*/true, &g);
  Tensor out = emb.forward(from_vector<int64_t>({1, 3, 3}));
  sum(out).backward();
  ASSERT_TRUE(emb.named_parameters()[0].second.grad().is_sparse());
}

TEST(Layers, ReLUInPlaceOverwritesItsInput) {
  Tensor x = from_vector<float>({-2, -0.5, 0, 1.5});
  x.set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  Tensor kept = ReLU().forward(y);
  EXPECT_FALSE(kept.is_same(y));
  Tensor r = ReLU(/*inplace=*/true).forward(y);
  EXPECT_TRUE(r.is_same(y));
  EXPECT_TRUE(equal(y, from_vector<float>({0, 0, 0, 3})));
  EXPECT_TRUE(equal(kept, y));
  sum(r).backward();
  EXPECT_TRUE(equal(x.grad(), from_vector<float>({0, 0, 0, 2})));
}

// ResNet's blocks run ReLU and the residual addition inside batch norm (BatchNorm2d::forward_relu,
// nn/models/resnet.cc): the gradient through the whole network, batch norm in training mode,
// still matches finite differences.
TEST(Layers, ResNetGradientThroughInPlaceOpsPassesGradcheck) {
  Generator g(5);
  ResNet net(ResNetOptions{8, 2, 1, 3}, &g);  // one block per stage, projection shortcuts
  net.to(kFloat64);
  Tensor x = randn({2, 1, 6, 6}, &g, kFloat64);
  x.set_requires_grad(true);
  autograd::GradcheckResult r = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return net.forward(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

// forward_relu(x, residual) against relu_(forward(x).add_(residual)) on twin layers: the same
// output, running statistics and gradients to the bit (Note [Batch norm + ReLU]), with and
// without a residual, in training and eval.
TEST(Layers, BatchNormForwardReluIsReluOfForwardPlusResidual) {
  for (bool with_residual : {false, true}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(std::string(with_residual ? "residual" : "no residual") +
                   (training ? ", training" : ", eval"));
      Generator g(3);
      const Tensor x0 = randn({4, 3, 5, 6}, &g) + 0.3, r0 = randn({4, 3, 5, 6}, &g);
      const Tensor grad = randn({4, 3, 5, 6}, &g);
      BatchNorm2d fused(3), plain(3);
      for (BatchNorm2d* bn : {&fused, &plain}) {
        bn->train(training);
        bn->named_parameters()[0].second.detach().copy_(from_vector<float>({1.5f, 0.5f, 1.0f}));
        bn->named_parameters()[1].second.detach().copy_(from_vector<float>({0.2f, -0.4f, 0.0f}));
      }
      std::vector<Tensor> inputs;
      std::vector<Tensor> outputs;
      for (BatchNorm2d* bn : {&fused, &plain}) {
        Tensor x = x0.clone(), r = r0.clone();
        x.set_requires_grad(true);
        r.set_requires_grad(true);
        Tensor residual = with_residual ? r : Tensor();
        Tensor out = bn == &fused ? bn->forward_relu(x, residual) : [&] {
          Tensor y = bn->forward(x);
          if (with_residual) y.add_(r);
          return relu_(y);
        }();
        out.backward(grad);
        outputs.push_back(out);
        inputs.push_back(x);
        inputs.push_back(r);
      }
      EXPECT_TRUE(equal(outputs[0], outputs[1]));
      EXPECT_TRUE(equal(inputs[0].grad(), inputs[2].grad()));
      if (with_residual) {
        EXPECT_TRUE(equal(inputs[1].grad(), inputs[3].grad()));
      }
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(equal(fused.named_parameters()[i].second.grad(),
                          plain.named_parameters()[i].second.grad()));
      }
      EXPECT_TRUE(equal(fused.named_buffers()[1].second, plain.named_buffers()[1].second));
    }
  }
}

TEST(Losses, CrossEntropyMatchesPyTorch) {
  // torch.nn.functional.cross_entropy(x, t) and with label_smoothing=0.1 (values from torch 1.13).
  Tensor x = from_vector<float>({1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f}, {2, 3});
  Tensor t = from_vector<int64_t>({1, 2});
  EXPECT_NEAR(functional::cross_entropy(x, t).item<double>(), 0.265126, 1e-5);
  EXPECT_NEAR(functional::cross_entropy(x, t, Reduction::kMean, 0.1).item<double>(), 0.423460, 1e-5);
}

}  // namespace
}  // namespace ember::nn
