// The Optimizer base: zero_grad in both modes, skipping parameters without a gradient, parameter
// groups with their own options, and the state_dict scheme (round trips continue identically,
// mismatches fail clearly and leave the optimizer untouched).
#include "optim/optimizer.h"

#include <cstdio>

#include <gtest/gtest.h>

#include "nn/checkpoint.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/optim/optim_test_util.h"

namespace ember::optim {
namespace {

using testing::param;
using testing::set_grad;
using testing::vals;

TEST(Optimizer, ZeroGradSetToNone) {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  SGD sgd({a, b}, SGDOptions(0.1));
  set_grad(a, {1.0, 1.0});
  sgd.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(Optimizer, ZeroGradInPlaceKeepsTheGradTensor) {
  Tensor a = param({1.0, 2.0});
  SGD sgd({a}, SGDOptions(0.1));
  set_grad(a, {1.0, 1.0});
  Tensor alias = a.grad();  // like DDP's bucket view under gradient_as_bucket_view
  sgd.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(a.grad().is_same(alias));
  EXPECT_EQ(vals(alias), (std::vector<double>{0.0, 0.0}));
}

TEST(Optimizer, ZeroGradSparse) {
  Tensor p = param({1, 2, 3, 4}, {2, 2});
  SGD sgd({p}, SGDOptions(0.1));
  p.mutable_grad() = sparse_coo_tensor(from_vector<int64_t>({1}, {1, 1}),
                                       from_vector<double>({1, 1}, {1, 2}), {2, 2});
  sgd.zero_grad(false);
  ASSERT_TRUE(p.grad().is_sparse());
  EXPECT_EQ(sparse_nnz(p.grad()), 0);
  sgd.step();  // an empty sparse gradient changes nothing
  EXPECT_EQ(vals(p), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Optimizer, SkipsParametersWithoutGrad) {
  Tensor a = param({1.0}), b = param({2.0});
  SGD sgd({a, b}, SGDOptions(0.5).momentum(0.9));
  Adam adam({a, b}, AdamOptions(0.1));
  set_grad(a, {1.0});
  sgd.step();
  adam.step();
  EXPECT_EQ(vals(b), (std::vector<double>{2.0}));
  EXPECT_EQ(sgd.state(b), nullptr);  // no buffer created for an unused parameter
  EXPECT_EQ(adam.state(b), nullptr);
  EXPECT_NE(sgd.state(a), nullptr);
}

TEST(Optimizer, ParamGroupsHaveTheirOwnOptions) {
  Tensor a = param({1.0}), b = param({1.0});
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});                  // takes the defaults
  groups.emplace_back(std::vector<Tensor>{b}, SGDOptions(0.5)); // its own lr
  SGD sgd(std::move(groups), SGDOptions(0.1));
  set_grad(a, {1.0});
  set_grad(b, {1.0});
  sgd.step();
  EXPECT_NEAR(vals(a)[0], 0.9, 1e-15);
  EXPECT_NEAR(vals(b)[0], 0.5, 1e-15);
  Tensor c = param({1.0});
  sgd.add_param_group(OptimizerParamGroup({c}));
  EXPECT_EQ(sgd.param_groups()[2].options().get_lr(), 0.1);
  EXPECT_EQ(sgd.parameters().size(), 3u);
}

TEST(Optimizer, RejectsBadParameters) {
  Tensor a = param({1.0});
  EXPECT_EMBER_ERROR(SGD({a, a}, SGDOptions(0.1)), "SGD", "more than once");
  EXPECT_EMBER_ERROR(SGD({Tensor()}, SGDOptions(0.1)), "parameter 0", "undefined");
  EXPECT_EMBER_ERROR(SGD({from_vector<int64_t>({1})}, SGDOptions(0.1)), "floating-point");
  Tensor nonleaf = a.mul(2.0);
  EXPECT_EMBER_ERROR(SGD({nonleaf}, SGDOptions(0.1)), "non-leaf");
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a}, AdamOptions());
  EXPECT_EMBER_ERROR(SGD(std::move(groups), SGDOptions(0.1)), "SGDOptions");
}

// Runs `steps` steps of the same gradient sequence on `opt`'s single parameter `p`.
void train(Optimizer& opt, const Tensor& p, int from, int to) {
  for (int t = from; t < to; ++t) {
    set_grad(p, {0.5 * t - 1, 0.1 * t * t});
    opt.step();
  }
}

template <typename Opt, typename Options>
void check_round_trip(const Options& opts, bool through_file) {
  Tensor p = param({1.0, -2.0});
  Opt a({p}, opts);
  train(a, p, 1, 4);
  nn::StateDict sd = a.state_dict();
  if (through_file) {
    const std::string path = ::testing::TempDir() + "/optim_state.safetensors";
    nn::save(sd, path);
    sd = nn::load(path);
    std::remove(path.c_str());
  }
  // A fresh optimizer (different options) over a copy of the parameter, then both continue.
  Tensor q = param(vals(p));
  Opt b({q}, Options(123.0));
  b.load_state_dict(sd);
  EXPECT_EQ(b.param_groups()[0].options().get_lr(), opts.get_lr());
  train(a, p, 4, 7);
  train(b, q, 4, 7);
  EXPECT_EQ(vals(p), vals(q));
}

TEST(OptimizerStateDict, SGDRoundTripContinuesIdentically) {
  check_round_trip<SGD>(SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01), false);
  check_round_trip<SGD>(SGDOptions(0.1).momentum(0.9).nesterov(true), true);
}

TEST(OptimizerStateDict, AdamRoundTripContinuesIdentically) {
  check_round_trip<Adam>(AdamOptions(0.01).betas({0.8, 0.95}).amsgrad(true), false);
  check_round_trip<Adam>(AdamOptions(0.01).weight_decay(0.1), true);
  check_round_trip<AdamW>(AdamWOptions(0.01).amsgrad(true), true);
}

TEST(OptimizerStateDict, KeysFollowTheDocumentedScheme) {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});
  groups.emplace_back(std::vector<Tensor>{b}, AdamOptions(0.5));
  Adam adam(std::move(groups), AdamOptions(0.01));
  set_grad(b, {1.0});
  adam.step();
  std::vector<std::string> keys;
  for (const auto& kv : adam.state_dict()) keys.push_back(kv.first);
  const std::vector<std::string> want = {
      "param_groups.0.params", "param_groups.0.lr", "param_groups.0.betas", "param_groups.0.eps",
      "param_groups.0.weight_decay", "param_groups.0.amsgrad", "param_groups.1.params",
      "param_groups.1.lr", "param_groups.1.betas", "param_groups.1.eps",
      "param_groups.1.weight_decay", "param_groups.1.amsgrad", "state.1.step", "state.1.exp_avg",
      "state.1.exp_avg_sq"};
  EXPECT_EQ(keys, want);
  const nn::StateDict sd = adam.state_dict();
  EXPECT_EQ(vals(nn::find_in(sd, "param_groups.1.params")), (std::vector<double>{1}));
  const Tensor lr = nn::find_in(sd, "param_groups.1.lr");
  EXPECT_EQ(lr.dtype(), kFloat64);
  EXPECT_EQ(lr.dim(), 0);
  EXPECT_EQ(lr.item<double>(), 0.5);
}

TEST(OptimizerStateDict, SparseMomentumBufferRoundTrips) {
  Tensor p = param({0, 1, 2, 3}, {2, 2});
  SGD a({p}, SGDOptions(0.1).momentum(0.9));
  auto step = [](SGD& opt, const Tensor& param) {
    param.mutable_grad() = sparse_coo_tensor(from_vector<int64_t>({1}, {1, 1}),
                                             from_vector<double>({1, 2}, {1, 2}), {2, 2});
    opt.step();
  };
  step(a, p);
  const nn::StateDict sd = a.state_dict();
  EXPECT_TRUE(nn::find_in(sd, "state.0.momentum_buffer.indices").defined());
  EXPECT_TRUE(nn::find_in(sd, "state.0.momentum_buffer.values").defined());
  Tensor q = param(vals(p), {2, 2});
  SGD b({q}, SGDOptions(0.1).momentum(0.9));
  b.load_state_dict(sd);
  step(a, p);
  step(b, q);
  EXPECT_EQ(vals(p), vals(q));
}

TEST(OptimizerStateDict, MismatchesFailClearlyAndChangeNothing) {
  Tensor p = param({1.0, -2.0});
  SGD a({p}, SGDOptions(0.1).momentum(0.9));
  set_grad(p, {1.0, 1.0});
  a.step();
  const nn::StateDict good = a.state_dict();

  Tensor q = param({1.0, 2.0, 3.0});
  SGD wrong_shape({q}, SGDOptions(0.7));
  EXPECT_EMBER_ERROR(wrong_shape.load_state_dict(good), "SGD::load_state_dict",
                     "state.0.momentum_buffer", "[2]", "[3]");
  EXPECT_EQ(wrong_shape.param_groups()[0].options().get_lr(), 0.7);  // untouched
  EXPECT_EQ(wrong_shape.state(q), nullptr);

  SGD two_params({param({1.0, 2.0}), param({1.0})}, SGDOptions(0.1));
  EXPECT_EMBER_ERROR(two_params.load_state_dict(good), "parameter group 0 has 2 parameters");

  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{param({1.0, 2.0})});
  groups.emplace_back(std::vector<Tensor>{param({1.0})});
  SGD two_groups(std::move(groups), SGDOptions(0.1));
  EXPECT_EMBER_ERROR(two_groups.load_state_dict(good), "2 parameter groups", "has 1");

  SGD ok({param({0.0, 0.0})}, SGDOptions(0.1));
  nn::StateDict extra = good;
  extra.emplace_back("state.0.exp_avg", zeros({2}, kFloat64));
  EXPECT_EMBER_ERROR(ok.load_state_dict(extra), "unexpected key 'state.0.exp_avg'");
  nn::StateDict out_of_range = good;
  out_of_range.emplace_back("state.5.momentum_buffer", zeros({2}, kFloat64));
  EXPECT_EMBER_ERROR(ok.load_state_dict(out_of_range), "'state.5.momentum_buffer'",
                     "parameter 5", "1 parameters");
  nn::StateDict missing;
  for (const auto& kv : good) {
    if (kv.first != "param_groups.0.momentum") missing.push_back(kv);
  }
  EXPECT_EMBER_ERROR(ok.load_state_dict(missing), "missing key 'param_groups.0.momentum'");
  EXPECT_EQ(ok.state(ok.parameters()[0]), nullptr);
}

}  // namespace
}  // namespace ember::optim
