// nn::SyncBatchNorm and the sync_batch_norm op under mpirun: N ranks holding shards of a
// batch (equal, unequal and empty shards) give what one process with BatchNorm on the whole batch
// gives -- outputs, input gradients, weight/bias gradients (summed over ranks, as DDP would), running
// statistics; gradients match finite differences of the group-wide loss (a distributed gradcheck)
// and autograd::gradcheck on a one-rank group. Tolerances: float64 1e-9 relative, float32 1e-5.
#include <numeric>

#include "autograd/gradcheck.h"
#include "distributed/sync_batch_norm.h"
#include "distributed/sync_batch_norm_function.h"
#include "nn/layers/container.h"
#include "tensor/nn_ops.h"
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kC = 3;

::testing::AssertionResult near(const Tensor& got, const Tensor& want, double rtol) {
  if (got.sizes() != want.sizes()) {
    return ::testing::AssertionFailure() << got.describe() << " vs expected " << want.describe();
  }
  if (got.numel() == 0 || allclose(got.to(kFloat64), want.to(kFloat64), rtol, rtol))
    return ::testing::AssertionSuccess();
  Tensor diff = max(abs(sub(got.to(kFloat64), want.to(kFloat64))));
  return ::testing::AssertionFailure()
         << got.describe() << " differs from expected by up to " << diff.item<double>();
}

Tensor summed_over_ranks(ProcessGroup& pg, const Tensor& t) {
  Tensor s = t.to(kFloat64).clone();
  std::vector<Tensor> list{s};
  pg.allreduce(list)->wait();
  return s;
}

class SyncBatchNormTest : public MpiTest {
 protected:
  // Rank r holds rows [offset(r), offset(r) + sizes[r]) of the global batch.
  int64_t offset(const std::vector<int64_t>& sizes, int r) const {
    return std::accumulate(sizes.begin(), sizes.begin() + r, int64_t{0});
  }

  // One training forward/backward of SyncBatchNorm on this rank's shard against BatchNorm on the
  // whole batch, then an eval forward (running statistics) against the same.
  void check_against_whole_batch(std::vector<int64_t> sizes, Shape item, ScalarType dtype, double rtol) {
    sizes.resize(world_, 2);
    const int64_t total = offset(sizes, world_);
    Shape shape{total};
    shape.insert(shape.end(), item.begin(), item.end());
    Generator g(7);
    Tensor X = randn(shape, &g).to(dtype), V = randn(shape, &g).to(dtype);
    Tensor w0 = randn({kC}, &g).to(dtype), b0 = randn({kC}, &g).to(dtype);

    // Reference: BatchNorm on the whole batch in one process.
    Tensor x = X.clone(), w = w0.clone(), b = b0.clone();
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    Tensor rm = zeros({kC}, dtype), rv = ones({kC}, dtype);
    Tensor ref_out = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    sum(mul(ref_out, V)).backward();

    // SyncBatchNorm on this rank's shard.
    nn::SyncBatchNorm layer(kC, nn::SyncBatchNormOptions{});
    layer.to(dtype);
    {
      NoGradGuard ng;
      copy_(layer.parameters()[0], w0);
      copy_(layer.parameters()[1], b0);
    }
    const int64_t first = offset(sizes, rank_), n = sizes[rank_];
    Tensor xs = X.narrow(0, first, n).clone();
    xs.set_requires_grad(true);
    Tensor out = layer.forward(xs);
    sum(mul(out, V.narrow(0, first, n))).backward();

    EXPECT_TRUE(near(out, ref_out.narrow(0, first, n), rtol)) << "output";
    ASSERT_TRUE(xs.grad().defined());
    EXPECT_TRUE(near(xs.grad(), x.grad().narrow(0, first, n), rtol)) << "input gradient";
    EXPECT_TRUE(near(summed_over_ranks(*pg_, layer.parameters()[0].grad()), w.grad(), rtol))
        << "weight gradient";
    EXPECT_TRUE(near(summed_over_ranks(*pg_, layer.parameters()[1].grad()), b.grad(), rtol))
        << "bias gradient";
    const auto buffers = layer.buffers();
    EXPECT_TRUE(near(buffers[0], rm, rtol)) << "running_mean";
    EXPECT_TRUE(near(buffers[1], rv, rtol)) << "running_var";
    EXPECT_EQ(buffers[2].item<int64_t>(), 1);

    layer.eval();
    NoGradGuard ng;
    Tensor eval_ref = batch_norm(X, w0, b0, rm, rv, false, 0.1, 1e-5);
    EXPECT_TRUE(near(layer.forward(X.narrow(0, first, n)), eval_ref.narrow(0, first, n), rtol))
        << "eval output";
  }
};

TEST_F(SyncBatchNormTest, EqualShardsMatchBatchNormOnTheWholeBatch) {
  check_against_whole_batch({4, 4, 4, 4}, {kC, 2, 3}, kFloat64, 1e-9);
}

TEST_F(SyncBatchNormTest, UnequalShardsMatchBatchNormOnTheWholeBatch) {
  check_against_whole_batch({3, 5, 1, 2}, {kC, 2, 3}, kFloat64, 1e-9);
}

TEST_F(SyncBatchNormTest, UnequalShardsFloat32) {
  check_against_whole_batch({5, 2, 3, 1}, {kC, 4, 4}, kFloat32, 1e-5);
}

// [N, C] input (BatchNorm1d's shape), rank 1 with a single row.
TEST_F(SyncBatchNormTest, TwoDimensionalInput) {
  check_against_whole_batch({6, 1, 3, 2}, {kC}, kFloat64, 1e-9);
}

// A rank with no rows contributes count 0 to the statistics and zeros to the backward sums.
TEST_F(SyncBatchNormTest, EmptyShardContributesNothing) {
  if (world_ < 2) GTEST_SKIP() << "needs another rank holding data";
  check_against_whole_batch({0, 3, 2, 4}, {kC, 2, 2}, kFloat64, 1e-9);
}

// Finite differences of L = sum over ranks of <out_r, V_r> with respect to every element of every
// rank's shard (one owner perturbs, every rank runs the forward: the collectives stay paired) and
// to weight and bias, against the analytic gradients.
TEST_F(SyncBatchNormTest, DistributedGradcheck) {
  std::vector<int64_t> sizes = {2, 3, 1, 2};
  sizes.resize(world_, 2);
  Generator g(11 + rank_);
  Tensor xs = randn({sizes[rank_], kC, 2}, &g, kFloat64), V = randn({sizes[rank_], kC, 2}, &g, kFloat64);
  Generator shared(5);
  Tensor w = randn({kC}, &shared, kFloat64), b = randn({kC}, &shared, kFloat64);
  SyncBatchNormArgs args;
  args.process_group = pg_;
  auto loss = [&]() {
    Tensor local = sum(mul(sync_batch_norm(xs, w, b, Tensor(), Tensor(), args), V)).reshape({1});
    std::vector<Tensor> list{local.detach().clone()};
    pg_->allreduce(list)->wait();
    return std::make_pair(local, list[0].item<double>());
  };
  xs.set_requires_grad(true);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  sum(loss().first).backward();
  const Tensor gx = xs.grad().clone();
  const Tensor gw = summed_over_ranks(*pg_, w.grad()), gb = summed_over_ranks(*pg_, b.grad());
  NoGradGuard ng;
  const double eps = 1e-6;
  auto numeric = [&](const Tensor& t, int64_t i, bool mine) {
    Tensor flat = t.view({-1});
    const double v = mine ? flat.narrow(0, i, 1).item<double>() : 0;
    if (mine) fill_(flat.narrow(0, i, 1), v + eps);
    const double plus = loss().second;
    if (mine) fill_(flat.narrow(0, i, 1), v - eps);
    const double minus = loss().second;
    if (mine) fill_(flat.narrow(0, i, 1), v);
    return (plus - minus) / (2 * eps);
  };
  for (int owner = 0; owner < world_; ++owner) {
    const int64_t n = sizes[owner] * kC * 2;
    for (int64_t i = 0; i < n; ++i) {
      const double d = numeric(xs, i, owner == rank_);
      if (owner == rank_) {
        EXPECT_NEAR(gx.view({-1}).narrow(0, i, 1).item<double>(), d, 1e-5) << "input element " << i;
      }
    }
  }
  for (int64_t c = 0; c < kC; ++c) {
    EXPECT_NEAR(gw.narrow(0, c, 1).item<double>(), numeric(w, c, true), 1e-5) << "weight " << c;
    EXPECT_NEAR(gb.narrow(0, c, 1).item<double>(), numeric(b, c, true), 1e-5) << "bias " << c;
  }
}

// The op on a one-rank group through autograd's own gradcheck (each rank checks alone).
TEST_F(SyncBatchNormTest, GradcheckOnOneRankGroup) {
  ProcessGroupPtr alone;
  for (int r = 0; r < world_; ++r) {
    ProcessGroupPtr group = new_group({r});
    if (r == rank_) alone = group;
  }
  ASSERT_NE(alone, nullptr);
  Generator g(3);
  std::vector<Tensor> inputs{randn({4, kC, 2}, &g, kFloat64), randn({kC}, &g, kFloat64),
                             randn({kC}, &g, kFloat64)};
  for (Tensor& t : inputs) t.set_requires_grad(true);
  SyncBatchNormArgs args;
  args.process_group = alone;
  auto result = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return sync_batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), args);
      },
      inputs);
  EXPECT_TRUE(result.ok) << result.message;
}

// Eval mode uses the running statistics and issues no collective: ranks may run different numbers
// of eval forwards (a short-timeout group turns a stray collective into a quick failure).
TEST_F(SyncBatchNormTest, EvalModeIssuesNoCollectives) {
  std::vector<int> all(world_);
  std::iota(all.begin(), all.end(), 0);
  nn::SyncBatchNormOptions options;
  options.process_group = new_group(all, std::chrono::milliseconds(3000));
  nn::SyncBatchNorm layer(kC, options);
  layer.eval();
  for (int i = 0; i <= rank_; ++i) layer.forward(ones({2, kC}));
  EXPECT_EQ(layer.buffers()[2].item<int64_t>(), 0);
}

TEST_F(SyncBatchNormTest, BadInputsNameTheLayerAndShapes) {
  nn::SyncBatchNorm layer(kC);
  EXPECT_THAT(error_of([&] { layer.forward(ones({4})); }),
              HasSubstr("SyncBatchNorm: expected input [N, 3, ...]"));
  EXPECT_THAT(error_of([&] { layer.forward(ones({4, 2})); }), HasSubstr("got float32[4, 2]"));
  SyncBatchNormArgs args;
  args.process_group = pg_;
  EXPECT_THAT(
      error_of([&] {
        sync_batch_norm(ones({2, kC}), ones({2}), Tensor(), Tensor(), Tensor(), args);
      }),
      HasSubstr("(rank " + std::to_string(rank_) + "): weight float32[2] on cpu must have 3 elements"));
  // Every rank with one value per channel: no variance to estimate.
  if (world_ == 1) {
    EXPECT_THAT(error_of([&] {
                  sync_batch_norm(ones({1, kC}), Tensor(), Tensor(), Tensor(), Tensor(), args);
                }),
                HasSubstr("expected more than 1 value per channel"));
  }
}

// A model holding its BatchNorm2d through a typed pointer, and one inside a Sequential.
struct TypedHolder : nn::Module {
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Sequential> seq;
  TypedHolder() : nn::Module("TypedHolder") {
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(kC));
    seq = register_module("seq", std::make_shared<nn::Sequential>());
    seq->push_back(std::make_shared<nn::BatchNorm2d>(kC));
  }
  Tensor forward(const Tensor& x) override { return seq->forward(bn->forward(x)); }
};

TEST_F(SyncBatchNormTest, ConvertReplacesEveryBatchNormAndSharesItsTensors) {
  auto model = std::make_shared<TypedHolder>();
  const std::vector<Tensor> before = model->parameters();
  const std::vector<Tensor> buffers_before = model->buffers();
  auto converted = nn::convert_sync_batchnorm(model, pg_);
  EXPECT_EQ(converted, model);
  int sync_layers = 0;
  for (auto& [name, m] : converted->named_modules()) {
    EXPECT_NE(m->type_name(), "BatchNorm2d") << name;
    if (m->type_name() == "SyncBatchNorm") ++sync_layers;
  }
  EXPECT_EQ(sync_layers, 2);
  const std::vector<Tensor> after = converted->parameters();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].is_same(before[i])) << "parameter " << i;
  for (size_t i = 0; i < buffers_before.size(); ++i)
    EXPECT_TRUE(converted->buffers()[i].is_same(buffers_before[i]));
  // The typed pointer now reaches the SyncBatchNorm: statistics over the group, so each rank's
  // output differs from its local BatchNorm whenever shards differ.
  Tensor x = add(randn({2, kC, 2, 2}), static_cast<double>(rank_));
  Tensor y = model->forward(x);
  auto local_bn = [](const Tensor& t) {
    return batch_norm(t, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  };
  if (world_ > 1) {
    EXPECT_FALSE(allclose(y, local_bn(local_bn(x)), 1e-3, 1e-3));
  }
  // A lone BatchNorm2d is replaced by a new module.
  auto lone = std::make_shared<nn::BatchNorm2d>(kC);
  EXPECT_EQ(nn::convert_sync_batchnorm(lone)->type_name(), "SyncBatchNorm");
}

}  // namespace
}  // namespace ember::distributed::testing
