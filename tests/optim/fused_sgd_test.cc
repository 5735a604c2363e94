// fused_sgd_ (Note [Fused SGD], tensor/fused_sgd.cc) against SGD's update as tensor ops: the same
// bits, at every CPU capability level (this suite runs once per level) and thread count, for each
// combination of momentum, dampening, weight decay and Nesterov; SGD::step's choice between the two
// paths; and the op's refusals.
#include <cstring>

#include <gtest/gtest.h>

#include "tests/optim/optim_test_util.h"

#include "optim/sgd.h"
#include "tensor/fused_sgd.h"
#include "tensor/parallel.h"

namespace ember::optim {
namespace {

using testing::sgd_op_by_op;

struct Case {
  const char* name;
  SgdHyperparameters h;
};

const Case kCases[] = {
    {"plain", {0.1, 0, 0, 0, false}},
    {"weight_decay", {0.05, 0, 0, 1e-2, false}},
    {"momentum", {0.1, 0.9, 0, 0, false}},
    {"momentum_dampening_weight_decay", {0.1, 0.9, 0.1, 5e-4, false}},
    {"nesterov_weight_decay", {0.3, 0.7, 0, 1e-3, true}},
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

// Sizes around the kernel's 4096-element chunks and the parallel grain.
const Shape kShapes[] = {{1}, {16}, {4095}, {4097}, {64, 16, 3, 3}, {20000}};

class FusedSgdTest : public ::testing::TestWithParam<std::tuple<ScalarType, int>> {
 protected:
  void SetUp() override {
    threads_before_ = get_num_threads();
    set_num_threads(std::get<1>(GetParam()));
  }
  void TearDown() override { set_num_threads(threads_before_); }
  ScalarType dtype() const { return std::get<0>(GetParam()); }
  Tensor random(const Shape& shape, uint64_t seed) {
    Generator gen(seed);
    return randn(shape, &gen, TensorOptions(dtype()));
  }

 private:
  int threads_before_ = 1;
};

TEST_P(FusedSgdTest, SameBitsAsTheTensorOpsOverSeveralSteps) {
  NoGradGuard no_grad;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    std::vector<SgdParameter> fused;
    std::vector<Tensor> params, bufs(std::size(kShapes));
    uint64_t seed = 1;
    for (const Shape& shape : kShapes) {
      Tensor p = random(shape, seed++);
      params.push_back(p.clone());
      fused.push_back({p, Tensor(), Tensor(), false});
    }
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < fused.size(); ++i) {
        const Tensor grad = random(fused[i].param.sizes(), 100 * step + i);
        fused[i].grad = grad;
        if (c.h.momentum != 0) {
          fused[i].first_step = step == 0;
          if (step == 0) fused[i].momentum_buffer = empty(grad.sizes(), TensorOptions(dtype()));
        }
        sgd_op_by_op(params[i], grad, bufs[i], c.h);
      }
      fused_sgd_(fused, c.h);
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(same_bits(fused[i].param, params[i]))
            << "step " << step << ", parameter " << fused[i].param.describe();
        if (c.h.momentum != 0) {
          ASSERT_TRUE(same_bits(fused[i].momentum_buffer, bufs[i]));
        }
      }
    }
  }
}

TEST_P(FusedSgdTest, UpdatesBumpTheVersionsOnce) {
  NoGradGuard no_grad;
  Tensor p = random({10}, 1), g = random({10}, 2), buf = zeros({10}, TensorOptions(dtype()));
  const uint32_t pv = p.version(), bv = buf.version(), gv = g.version();
  fused_sgd_({{p, g, buf, false}}, {0.1, 0.9, 0, 0, false});
  EXPECT_EQ(p.version(), pv + 1);
  EXPECT_EQ(buf.version(), bv + 1);
  EXPECT_EQ(g.version(), gv);
}

// SGD::step fuses the dense contiguous parameters and updates the rest with tensor ops; both
// give the op-by-op result.
TEST_P(FusedSgdTest, SgdStepFusesWhatItCanAndMatchesTheOpsEverywhere) {
  const SgdHyperparameters h{0.1, 0.9, 0.1, 1e-3, false};
  Tensor dense = random({40, 30}, 1).set_requires_grad(true);
  Tensor transposed = random({30, 40}, 2).t().set_requires_grad(true);  // not contiguous
  Tensor want_dense = dense.detach().clone(), want_transposed = transposed.detach().clone();
  Tensor buf_dense, buf_transposed;
  SGD sgd({dense, transposed}, SGDOptions(h.lr).momentum(h.momentum).dampening(h.dampening)
                                   .weight_decay(h.weight_decay));
  for (int step = 0; step < 3; ++step) {
    dense.mutable_grad() = random({40, 30}, 10 + step);
    transposed.mutable_grad() = random({40, 30}, 20 + step);
    sgd.step();
    NoGradGuard no_grad;
    sgd_op_by_op(want_dense, dense.grad(), buf_dense, h);
    sgd_op_by_op(want_transposed, transposed.grad(), buf_transposed, h);
    ASSERT_TRUE(same_bits(dense.detach(), want_dense)) << "step " << step;
    ASSERT_TRUE(same_bits(transposed.detach().contiguous(), want_transposed.contiguous()))
        << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndThreads, FusedSgdTest,
                         ::testing::Combine(::testing::Values(kFloat32, kFloat64),
                                            ::testing::Values(1, 2, 3)));

TEST(FusedSgdErrors, NamesTheParameterAndWhatIsWrong) {
  NoGradGuard no_grad;
  const SgdHyperparameters momentum{0.1, 0.9, 0, 0, false};
  Tensor p = zeros({4}), g = ones({4});
  EXPECT_EMBER_ERROR(fused_sgd_({{p, ones({5}), Tensor(), false}}, {}), "fused_sgd_",
                     "parameter 0", "float32[4]", "float32[5]");
  EXPECT_EMBER_ERROR(fused_sgd_({{p, g, Tensor(), false}}, momentum), "fused_sgd_",
                     "needs momentum buffer");
  EXPECT_EMBER_ERROR(fused_sgd_({{p, g, zeros({4}), false}}, {}), "takes no momentum buffer");
  Tensor i = zeros({4}, kInt64);
  EXPECT_EMBER_ERROR(fused_sgd_({{i, i.clone(), Tensor(), false}}, {}), "int64[4]",
                     "only float32 and float64");
  EXPECT_EMBER_ERROR(fused_sgd_({{p, p, Tensor(), false}}, {}), "must not share storage");
  EXPECT_EMBER_ERROR(fused_sgd_({{p, g, g, false}}, momentum), "must not share storage");
  EXPECT_EMBER_ERROR(fused_sgd_({{p, g, Tensor(), false}, {zeros({2, 2}).t(), ones({2, 2}),
                                                           Tensor(), false}},
                                {}),
                     "parameter 1", "dense contiguous");
  EXPECT_EMBER_ERROR(fused_sgd_({{p, zeros({4}, kFloat64), Tensor(), false}}, {}),
                     "float64[4]");
}

TEST(FusedSgdErrors, RefusesALeafThatRequiresGradUnderGradMode) {
  Tensor p = zeros({3}).set_requires_grad(true);
  EXPECT_EMBER_ERROR(fused_sgd_({{p, ones({3}), Tensor(), false}}, {}), "fused_sgd_",
                     "requires grad", "NoGradGuard");
}

}  // namespace
}  // namespace ember::optim
