// LR schedulers against the lrs PyTorch 1.13 reports (get_last_lr) for the same schedules, and
// against their closed forms written out here.
#include "optim/lr_scheduler.h"

#include <cmath>

#include <gtest/gtest.h>

#include "optim/sgd.h"
#include "tests/optim/optim_test_util.h"

namespace ember::optim {
namespace {

using testing::param;

// The lr after construction and after each of steps() step()s.
template <typename Make>
std::vector<double> schedule(Make make, int steps) {
  Tensor p = param({0.0});
  SGD sgd({p}, SGDOptions(0.5));
  auto sched = make(sgd);
  std::vector<double> lrs = {sgd.param_groups()[0].options().get_lr()};
  EXPECT_EQ(sched.get_last_lr()[0], lrs[0]);
  for (int i = 0; i < steps; ++i) {
    sched.step();
    EXPECT_EQ(sched.get_last_lr()[0], sgd.param_groups()[0].options().get_lr());
    lrs.push_back(sched.get_last_lr()[0]);
  }
  EXPECT_EQ(sched.last_epoch(), steps);
  return lrs;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "epoch " << i;
}

TEST(StepLR, MatchesPyTorch) {
  auto lrs = schedule([](Optimizer& o) { return StepLR(o, 3, 0.5); }, 12);
  expect_near_all(lrs, {0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.0625, 0.0625,
                        0.0625, 0.03125});
}

TEST(MultiStepLR, MatchesPyTorch) {
  auto lrs = schedule([](Optimizer& o) { return MultiStepLR(o, {2, 5, 9}, 0.1); }, 12);
  expect_near_all(lrs, {0.5, 0.5, 0.05, 0.05, 0.05, 0.005, 0.005, 0.005, 0.005, 0.0005, 0.0005,
                        0.0005, 0.0005});
}

TEST(CosineAnnealingLR, MatchesPyTorch) {
  auto lrs = schedule([](Optimizer& o) { return CosineAnnealingLR(o, 10, 0.01); }, 12);
  expect_near_all(lrs, {0.5, 0.48800884649231263, 0.4532091636218621, 0.39900738681165593,
                        0.33070916362186215, 0.255, 0.17929083637813792, 0.11099261318834411,
                        0.05679083637813791, 0.021991153507687385, 0.01, 0.021991153507687385,
                        0.05679083637813806});
  for (int e = 0; e <= 12; ++e) {
    EXPECT_NEAR(lrs[e], 0.01 + 0.49 * (1 + std::cos(M_PI * e / 10)) / 2, 1e-15);
  }
}

TEST(LinearLR, WarmupMatchesPyTorch) {
  auto lrs = schedule([](Optimizer& o) { return LinearWarmup(o, 4, 0.25); }, 8);
  expect_near_all(lrs, {0.125, 0.21875, 0.3125, 0.40625, 0.5, 0.5, 0.5, 0.5, 0.5});
  auto decay = schedule([](Optimizer& o) { return LinearLR(o, 1.0, 0.5, 2); }, 3);
  expect_near_all(decay, {0.5, 0.375, 0.25, 0.25});
}

TEST(LRScheduler, EachGroupFromItsOwnBaseLr) {
  Tensor a = param({0.0}), b = param({0.0});
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});
  groups.emplace_back(std::vector<Tensor>{b}, SGDOptions(2.0));
  SGD sgd(std::move(groups), SGDOptions(0.5));
  StepLR sched(sgd, 1, 0.5);
  sched.step();
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.25, 1.0}));
  EXPECT_EQ(sgd.param_groups()[1].options().get_lr(), 1.0);
}

TEST(LRScheduler, StateDictResumes) {
  Tensor p = param({0.0});
  SGD sgd({p}, SGDOptions(0.5));
  CosineAnnealingLR a(sgd, 10);
  for (int i = 0; i < 4; ++i) a.step();
  const nn::StateDict sd = a.state_dict();

  SGD sgd2({param({0.0})}, SGDOptions(0.5));
  CosineAnnealingLR b(sgd2, 10);
  b.load_state_dict(sd);
  EXPECT_EQ(b.last_epoch(), 4);
  EXPECT_EQ(sgd2.param_groups()[0].options().get_lr(), a.get_last_lr()[0]);
  a.step();
  b.step();
  EXPECT_EQ(a.get_last_lr(), b.get_last_lr());
}

// nanoGPT's get_lr with learning_rate 0.5, warmup_iters 2, lr_decay_iters 6, min_lr 0.05.
TEST(WarmupCosineLR, MatchesNanoGPTsGetLr) {
  auto lrs = schedule([](Optimizer& o) { return WarmupCosineLR(o, 2, 6, 0.1); }, 8);
  expect_near_all(lrs, {0.5 * 1 / 3, 0.5 * 2 / 3, 0.5, 0.05 + 0.45 * (1 + std::cos(M_PI / 4)) / 2, 0.275,
                        0.05 + 0.45 * (1 + std::cos(3 * M_PI / 4)) / 2, 0.05, 0.05, 0.05});
  EXPECT_NEAR(lrs[3], 0.4340990257669732, 1e-15);  // the formula's values, as Python prints them
  EXPECT_NEAR(lrs[5], 0.11590097423302682, 1e-15);
}

TEST(LRScheduler, RejectsBadArguments) {
  Tensor p = param({0.0});
  SGD sgd({p}, SGDOptions(0.5));
  EXPECT_EMBER_ERROR(StepLR(sgd, 0), "StepLR", "step_size");
  EXPECT_EMBER_ERROR(MultiStepLR(sgd, {5, 2}), "MultiStepLR", "increasing");
  EXPECT_EMBER_ERROR(CosineAnnealingLR(sgd, 0), "CosineAnnealingLR", "T_max");
  EXPECT_EMBER_ERROR(LinearLR(sgd, 0.0), "LinearLR", "start_factor");
  EXPECT_EMBER_ERROR(LinearWarmup(sgd, 0), "LinearLR", "total_iters");
  EXPECT_EMBER_ERROR(WarmupCosineLR(sgd, 5, 5), "WarmupCosineLR: needs 0 <= warmup_iters < decay_iters, got warmup_iters 5");
  EXPECT_EMBER_ERROR(WarmupCosineLR(sgd, 0, 5, 1.5), "min_lr_factor must be in [0, 1], got 1.5");
}

}  // namespace
}  // namespace ember::optim
