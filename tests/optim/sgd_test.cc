// SGD: three steps on a 2-element parameter against the update rule written out by hand here, and
// against the numbers PyTorch 1.13 prints for the same run; sparse gradients as in PyTorch.
#include "optim/sgd.h"

#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

namespace ember::optim {
namespace {

using testing::param;
using testing::set_grad;

// The gradient fed at step t (1-based) in every dense test, as in the PyTorch reference script.
std::vector<double> grad_at(int t) { return {0.5 * t, 0.3 - 0.2 * t * t}; }

// PyTorch's SGD rule, element by element.
std::vector<double> reference_sgd(double lr, double momentum, double dampening, double wd,
                                  bool nesterov, int steps) {
  std::vector<double> p = {1.0, -2.0}, buf(2, 0.0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> g0 = grad_at(t);
    for (int i = 0; i < 2; ++i) {
      double g = g0[i] + wd * p[i];
      if (momentum != 0) {
        buf[i] = t == 1 ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
  return p;
}

std::vector<double> run(const SGDOptions& opts, int steps) {
  Tensor p = param({1.0, -2.0});
  SGD sgd({p}, opts);
  for (int t = 1; t <= steps; ++t) {
    set_grad(p, grad_at(t));
    sgd.step();
  }
  return testing::vals(p);
}

TEST(SGD, PlainMatchesHandDerivedAndPyTorch) {
  const auto got = run(SGDOptions(0.1), 3);
  EXPECT_NEAR(got[0], reference_sgd(0.1, 0, 0, 0, false, 3)[0], 1e-15);
  // 1 - 0.1 * (0.5 + 1.0 + 1.5) = 0.7;  -2 - 0.1 * (0.1 - 0.5 - 1.5) = -1.81
  EXPECT_NEAR(got[0], 0.7, 1e-15);
  EXPECT_NEAR(got[1], -1.81, 1e-15);
}

TEST(SGD, MomentumDampeningWeightDecay) {
  const auto got = run(SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01), 3);
  const auto want = reference_sgd(0.1, 0.9, 0.1, 0.01, false, 3);
  EXPECT_NEAR(got[0], want[0], 1e-14);
  EXPECT_NEAR(got[1], want[1], 1e-14);
  EXPECT_NEAR(got[0], 0.5534361886899999, 1e-14);  // torch.optim.SGD, float64
  EXPECT_NEAR(got[1], -1.7959747664799999, 1e-14);
}

TEST(SGD, FirstStepBufferIsTheGradientUndamped) {
  // With dampening, PyTorch still seeds the buffer with the full gradient on the first step.
  const auto got = run(SGDOptions(1.0).momentum(0.5).dampening(0.9), 1);
  EXPECT_NEAR(got[0], 1.0 - 0.5, 1e-15);
  EXPECT_NEAR(got[1], -2.0 - 0.1, 1e-15);
}

TEST(SGD, Nesterov) {
  const auto got = run(SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01), 3);
  const auto want = reference_sgd(0.1, 0.9, 0, 0.01, true, 3);
  EXPECT_NEAR(got[0], want[0], 1e-14);
  EXPECT_NEAR(got[1], want[1], 1e-14);
  EXPECT_NEAR(got[0], 0.26489045819099993, 1e-14);
  EXPECT_NEAR(got[1], -1.597897390872, 1e-14);
}

TEST(SGD, UpdatesInPlaceAndKeepsStorage) {
  Tensor p = param({1.0, -2.0});
  Tensor view = p.view({2});  // e.g. DDP's bucket view of the same storage
  const void* data = p.data_ptr();
  SGD sgd({p}, SGDOptions(0.5).momentum(0.9));
  set_grad(p, {1.0, 1.0});
  sgd.step();
  EXPECT_EQ(p.data_ptr(), data);
  EXPECT_VALUES_NEAR(view, (std::vector<double>{0.5, -2.5}), 1e-15);
  EXPECT_FALSE(p.grad().requires_grad());
}

TEST(SGD, Float32Parameter) {
  Tensor p = from_vector<float>({1.0f, 2.0f});
  p.set_requires_grad(true);
  SGD sgd({p}, SGDOptions(0.25).momentum(0.5));
  for (int t = 0; t < 2; ++t) {
    p.mutable_grad() = from_vector<float>({1.0f, -1.0f});
    sgd.step();
  }
  // buf: 1 then 1.5; p: 1 - 0.25 - 0.375
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_VALUES_NEAR(p, (std::vector<double>{0.375, 2.625}), 1e-7);
}

TEST(SGD, RejectsBadOptions) {
  Tensor p = param({1.0});
  EXPECT_EMBER_ERROR(SGD({p}, SGDOptions(-0.1)), "SGD", "invalid learning rate", "-0.1");
  EXPECT_EMBER_ERROR(SGD({p}, SGDOptions(0.1).momentum(-1)), "invalid momentum");
  EXPECT_EMBER_ERROR(SGD({p}, SGDOptions(0.1).weight_decay(-1)), "invalid weight_decay");
  EXPECT_EMBER_ERROR(SGD({p}, SGDOptions(0.1).nesterov(true)), "Nesterov", "momentum");
  EXPECT_EMBER_ERROR(SGD({p}, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)),
                     "zero dampening");
}

// ---- sparse gradients (Embedding(sparse=true)) ----------------------------------------------------

// Rows [0, 0, 2] of a [3, 2] parameter, the duplicate row summed by coalesce.
Tensor sparse_grad() {
  return sparse_coo_tensor(from_vector<int64_t>({0, 0, 2}, {1, 3}),
                           from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}), {3, 2});
}

std::vector<double> run_sparse(const SGDOptions& opts) {
  Tensor p = param({0, 1, 2, 3, 4, 5}, {3, 2});
  SGD sgd({p}, opts);
  for (int t = 0; t < 3; ++t) {
    p.mutable_grad() = sparse_grad();
    sgd.step();
  }
  return testing::vals(p);
}

TEST(SGD, SparseTouchesOnlyPresentRows) {
  // Row 0 gets (1+3, 2+4) = (4, 6) per step, row 2 gets (5, 6), row 1 nothing.
  const auto got = run_sparse(SGDOptions(0.1));
  const std::vector<double> want = {0 - 1.2, 1 - 1.8, 2, 3, 4 - 1.5, 5 - 1.8};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-14) << i;
}

TEST(SGD, SparseWithMomentumMatchesPyTorch) {
  // PyTorch 1.13 keeps a sparse momentum buffer; numbers from torch.optim.SGD (float32 run).
  const auto mom = run_sparse(SGDOptions(0.1).momentum(0.9));
  const std::vector<double> want_mom = {-2.244, -2.366, 2, 3, 1.195, 1.634};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(mom[i], want_mom[i], 1e-6) << i;
  const auto nest = run_sparse(SGDOptions(0.1).momentum(0.9).nesterov(true));
  const std::vector<double> want_nest = {-3.2196, -3.8294, 2, 3, -0.0245, 0.1706};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(nest[i], want_nest[i], 1e-6) << i;
}

TEST(SGD, SparseMomentumBufferKeepsEarlierRows) {
  // Rows touched earlier keep moving with the decayed buffer (PyTorch: buf.mul_(m).add_(g)).
  Tensor p = param({0, 1, 2, 3, 4, 5}, {3, 2});
  SGD sgd({p}, SGDOptions(0.1).momentum(0.9).dampening(0.5));
  const std::vector<std::pair<std::vector<int64_t>, std::vector<double>>> grads = {
      {{0}, {1, 2}}, {{2}, {3, 4}}, {{1, 0}, {5, 6, 7, 8}}};
  for (const auto& [rows, values] : grads) {
    p.mutable_grad() = sparse_coo_tensor(
        from_vector<int64_t>(rows, {1, static_cast<int64_t>(rows.size())}),
        from_vector<double>(values, {static_cast<int64_t>(rows.size()), 2}), {3, 2});
    sgd.step();
  }
  EXPECT_TRUE(sgd.state(p) != nullptr && sgd.state(p)->front().second.is_sparse());
  const std::vector<double> want = {-0.621, 0.058, 1.75, 2.7, 3.715, 4.62};  // PyTorch, float64
  EXPECT_VALUES_NEAR(p, want, 1e-12);
}

TEST(SGD, SparseWithWeightDecayIsRejected) {
  Tensor p = param({0, 1, 2, 3, 4, 5}, {3, 2});
  SGD sgd({p}, SGDOptions(0.1).weight_decay(0.01));
  p.mutable_grad() = sparse_grad();
  EXPECT_EMBER_ERROR(sgd.step(), "SGD", "weight_decay", "sparse", "parameter 0");
}

}  // namespace
}  // namespace ember::optim
