// Adam and AdamW: three steps on a 2-element parameter against PyTorch's bias-corrected rule
// written out by hand, and against the numbers PyTorch 1.13 prints for the same runs.
#include "optim/adam.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

namespace ember::optim {
namespace {

using testing::param;
using testing::set_grad;

std::vector<double> grad_at(int t) { return {0.5 * t, 0.3 - 0.2 * t * t}; }

std::vector<double> reference_adam(double lr, double b1, double b2, double eps, double wd,
                                   bool amsgrad, bool decoupled, int steps) {
  std::vector<double> p = {1.0, -2.0}, m(2, 0), v(2, 0), vmax(2, 0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> g0 = grad_at(t);
    for (int i = 0; i < 2; ++i) {
      double g = g0[i];
      if (decoupled) {
        p[i] *= 1 - lr * wd;
      } else {
        g += wd * p[i];
      }
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      const double denom = std::sqrt(amsgrad ? vmax[i] : v[i]) / std::sqrt(bc2) + eps;
      p[i] -= lr / bc1 * m[i] / denom;
    }
  }
  return p;
}

template <typename Opt, typename Options>
std::vector<double> run(const Options& opts, int steps) {
  Tensor p = param({1.0, -2.0});
  Opt opt({p}, opts);
  for (int t = 1; t <= steps; ++t) {
    set_grad(p, grad_at(t));
    opt.step();
  }
  return testing::vals(p);
}

TEST(Adam, Defaults) {
  AdamOptions o;
  EXPECT_EQ(o.lr(), 1e-3);
  EXPECT_EQ(o.betas(), (Betas{0.9, 0.999}));
  EXPECT_EQ(o.eps(), 1e-8);
  EXPECT_EQ(o.weight_decay(), 0.0);
  EXPECT_FALSE(o.amsgrad());
  EXPECT_EQ(AdamWOptions().weight_decay(), 1e-2);
}

TEST(Adam, FirstStepMovesByLr) {
  // After one step m/(1-b1) = g and sqrt(v/(1-b2)) = |g|, so each element moves by lr * sign(g).
  const auto got = run<Adam>(AdamOptions(0.01).eps(0), 1);
  EXPECT_NEAR(got[0], 1.0 - 0.01, 1e-15);
  EXPECT_NEAR(got[1], -2.0 - 0.01, 1e-15);  // g = (0.5, 0.1): both positive
}

TEST(Adam, MatchesHandDerivedAndPyTorch) {
  const auto got = run<Adam>(AdamOptions(0.01), 3);
  const auto want = reference_adam(0.01, 0.9, 0.999, 1e-8, 0, false, false, 3);
  EXPECT_NEAR(got[0], want[0], 1e-14);
  EXPECT_NEAR(got[1], want[1], 1e-14);
  EXPECT_NEAR(got[0], 0.9707681679115365, 1e-14);
  EXPECT_NEAR(got[1], -1.9964799531049573, 1e-14);
}

TEST(Adam, WeightDecayAndAmsgrad) {
  const auto got = run<Adam>(AdamOptions(0.01).betas({0.8, 0.9}).weight_decay(0.1).amsgrad(true), 3);
  const auto want = reference_adam(0.01, 0.8, 0.9, 1e-8, 0.1, true, false, 3);
  EXPECT_NEAR(got[0], want[0], 1e-14);
  EXPECT_NEAR(got[1], want[1], 1e-14);
  EXPECT_NEAR(got[0], 0.9704954937127855, 1e-14);
  EXPECT_NEAR(got[1], -1.9729628120130707, 1e-14);
}

TEST(AdamW, MatchesHandDerivedAndPyTorch) {
  const auto got = run<AdamW>(AdamWOptions(0.01), 3);
  const auto want = reference_adam(0.01, 0.9, 0.999, 1e-8, 1e-2, false, true, 3);
  EXPECT_NEAR(got[0], want[0], 1e-14);
  EXPECT_NEAR(got[1], want[1], 1e-14);
  EXPECT_NEAR(got[0], 0.9704711629925101, 1e-14);
  EXPECT_NEAR(got[1], -1.995878611557323, 1e-14);
}

TEST(AdamW, Amsgrad) {
  const auto got = run<AdamW>(AdamWOptions(0.01).weight_decay(0.1).amsgrad(true), 3);
  EXPECT_NEAR(got[0], 0.9678008087312729, 1e-14);
  EXPECT_NEAR(got[1], -1.9904719446486114, 1e-14);
}

TEST(Adam, StateBuffersAndStepCount) {
  Tensor p = param({1.0, -2.0});
  Adam adam({p}, AdamOptions(0.01).amsgrad(true));
  EXPECT_EQ(adam.state(p), nullptr);
  set_grad(p, {1.0, 2.0});
  adam.step();
  adam.step();
  const ParamState* st = adam.state(p);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(nn::find_in(*st, "step").item<double>(), 2.0);
  // exp_avg after two steps of the same g: (1 - 0.9^2) g
  EXPECT_VALUES_NEAR(nn::find_in(*st, "exp_avg"), (std::vector<double>{0.19, 0.38}), 1e-15);
  EXPECT_TRUE(nn::find_in(*st, "exp_avg_sq").defined());
  EXPECT_TRUE(nn::find_in(*st, "max_exp_avg_sq").defined());
}

TEST(Adam, RejectsSparseGradientsAndBadOptions) {
  Tensor p = param({1, 2, 3, 4}, {2, 2});
  Adam adam({p});
  p.mutable_grad() = sparse_coo_tensor(from_vector<int64_t>({1}, {1, 1}),
                                       from_vector<double>({1, 1}, {1, 2}), {2, 2});
  EXPECT_EMBER_ERROR(adam.step(), "Adam does not support sparse gradients", "SparseAdam");
  EXPECT_EMBER_ERROR(Adam({p}, AdamOptions(-1)), "Adam", "invalid learning rate");
  EXPECT_EMBER_ERROR(Adam({p}, AdamOptions().betas({1.0, 0.9})), "invalid beta parameter at index 0");
  EXPECT_EMBER_ERROR(Adam({p}, AdamOptions().betas({0.9, -0.1})), "invalid beta parameter at index 1");
  EXPECT_EMBER_ERROR(AdamW({p}, AdamWOptions().eps(-1)), "AdamW", "invalid epsilon");
}

}  // namespace
}  // namespace ember::optim
