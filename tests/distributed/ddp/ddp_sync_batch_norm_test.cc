// DDP over a model converted with convert_sync_batchnorm, against one process training
// the unconverted model (BatchNorm) on the whole batch: ranks hold unequal shards; and the same
// under Join with ranks holding 3, 5, 8 (and 1) batches, where a joined rank contributes count 0 to
// the statistics (SyncBatchNormJoinable). Loss of one step in the reference: (1/world) * sum over
// the (training) shards of the shard's mean cross-entropy, BatchNorm statistics over the rows of
// all (training) shards -- what DDP's averaging and SyncBatchNorm's statistics compute.
// Tolerance: float32, relative 1e-5 (absolute 1e-6) on parameters and buffers.
#include <algorithm>
#include <numeric>

#include "distributed/sync_batch_norm.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

constexpr double kRtol = 1e-5;

std::vector<int64_t> shard_sizes(int world) {
  std::vector<int64_t> sizes = {3, 5, 2, 4};
  sizes.resize(world, 3);
  return sizes;
}

using ModelFactory = std::function<std::shared_ptr<nn::Module>(uint64_t seed)>;

class DdpSyncBatchNorm : public MpiTest {
 protected:
  void expect_join_matches_reference(const ModelFactory& make_model);
  std::vector<int> all_ranks() const {
    std::vector<int> r(world_);
    std::iota(r.begin(), r.end(), 0);
    return r;
  }
};

TEST_F(DdpSyncBatchNorm, UnequalShardsMatchBatchNormOnTheWholeBatch) {
  const std::vector<int64_t> sizes = shard_sizes(world_);
  std::vector<int64_t> offsets(world_ + 1, 0);
  for (int r = 0; r < world_; ++r) offsets[r + 1] = offsets[r] + sizes[r];
  const int steps = 4;
  auto batch = [&](int step) { return random_batches({6}, 4)(step, offsets[world_]); };

  auto reference = mlp_with_batch_norm(1234);
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    ref_opt.zero_grad();
    auto b = batch(step);
    Tensor out = reference->forward(b.first);
    Tensor loss;
    for (int r = 0; r < world_; ++r) {
      Tensor l = div(nn::functional::cross_entropy(out.narrow(0, offsets[r], sizes[r]),
                                                   b.second.narrow(0, offsets[r], sizes[r])),
                     static_cast<double>(world_));
      loss = loss.defined() ? add(loss, l) : l;
    }
    loss.backward();
    ref_opt.step();
  }

  auto model = nn::convert_sync_batchnorm(mlp_with_batch_norm(rank_ == 0 ? 1234 : 1234 + 17 * rank_));
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    auto b = rows(batch(step), offsets[rank_], sizes[rank_]);
    nn::functional::cross_entropy(ddp->forward(b.first), b.second).backward();
    opt.step();
  }
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference->parameters(), kRtol));
  EXPECT_TRUE(parameters_match(model->buffers(), reference->buffers(), kRtol));
}

// Join: in iteration t the ranks with more than t batches train; the others shadow DDP and
// SyncBatchNorm. SyncBatchNorm runs on a group of its own (SyncBatchNormJoinable requires it).
void DdpSyncBatchNorm::expect_join_matches_reference(const ModelFactory& make_model) {
  const std::vector<int> counts = {3, 5, 8, 1};
  auto batches_of = [&](int r) { return counts[r % counts.size()]; };
  constexpr int64_t kPerRank = 4;
  auto shard = [&](int t, int r) {
    return rows(random_batches({6}, 4)(t, world_ * kPerRank), r * kPerRank, kPerRank);
  };
  int steps = 0;
  for (int r = 0; r < world_; ++r) steps = std::max(steps, batches_of(r));

  auto reference = make_model(1234);
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int t = 0; t < steps; ++t) {
    std::vector<Tensor> xs, ys;
    for (int r = 0; r < world_; ++r) {
      if (batches_of(r) <= t) continue;
      auto s = shard(t, r);
      xs.push_back(s.first);
      ys.push_back(s.second);
    }
    ref_opt.zero_grad();
    Tensor out = reference->forward(cat(xs));
    Tensor loss;
    for (size_t i = 0; i < xs.size(); ++i) {
      Tensor l = div(nn::functional::cross_entropy(out.narrow(0, i * kPerRank, kPerRank), ys[i]),
                     static_cast<double>(world_));
      loss = loss.defined() ? add(loss, l) : l;
    }
    loss.backward();
    ref_opt.step();
  }

  ProcessGroupPtr bn_group = new_group(all_ranks());
  auto model = nn::convert_sync_batchnorm(make_model(rank_ == 0 ? 1234 : 1234 + 17 * rank_), bn_group);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  SyncBatchNormJoinable bn_joinable(model, ddp->join_process_group());
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Join::run({ddp.get(), &bn_joinable}, JoinOptions{}, [&] {
    for (int t = 0; t < batches_of(rank_); ++t) {
      opt.zero_grad();
      auto s = shard(t, rank_);
      nn::functional::cross_entropy(ddp->forward(s.first), s.second).backward();
      opt.step();
    }
  });
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference->parameters(), kRtol));
  EXPECT_TRUE(parameters_match(model->buffers(), reference->buffers(), kRtol));
}

TEST_F(DdpSyncBatchNorm, JoinedRanksContributeZeroCount) {
  expect_join_matches_reference(mlp_with_batch_norm);
}

// Two BatchNorms of different widths, registered in the opposite order of their use: a joined rank
// replays the order its own last iteration used, not registration order.
struct CrossedBatchNorms : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, head;
  std::shared_ptr<RowBatchNorm> late, early;
  explicit CrossedBatchNorms(uint64_t seed) : nn::Module("CrossedBatchNorms") {
    Generator g(seed);
    late = register_module("late", std::make_shared<RowBatchNorm>(3));
    early = register_module("early", std::make_shared<RowBatchNorm>(5));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 5, true, &g));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(5, 3, true, &g));
    head = register_module("head", std::make_shared<nn::Linear>(3, 4, true, &g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(early->forward(fc1->forward(x)));
    return head->forward(relu(late->forward(fc2->forward(h))));
  }
};

TEST_F(DdpSyncBatchNorm, JoinedRanksReplayTheForwardOrder) {
  expect_join_matches_reference([](uint64_t seed) { return std::make_shared<CrossedBatchNorms>(seed); });
}

// The joinable refuses layers on the Join's own group (their collectives would interleave with
// DDP's), and Join refuses it as its only joinable.
TEST_F(DdpSyncBatchNorm, JoinableNeedsItsOwnGroup) {
  auto model = nn::convert_sync_batchnorm(mlp_with_batch_norm(1), pg_);
  EXPECT_THAT(error_of([&] { SyncBatchNormJoinable j(model, pg_); }),
              ::testing::HasSubstr("communicates over the Join's process group"));
  EXPECT_THAT(error_of([&] { SyncBatchNormJoinable j(mlp(1), pg_); }),
              ::testing::HasSubstr("no SyncBatchNorm layer"));
  // Alone it cannot drive Join: nothing would count the ranks still training.
  auto own = nn::convert_sync_batchnorm(mlp_with_batch_norm(1), new_group(all_ranks()));
  SyncBatchNormJoinable shadow(own, pg_);
  EXPECT_THAT(error_of([&] { Join j({&shadow}); }),
              ::testing::HasSubstr("every joinable is an async shadow"));
}

}  // namespace
}  // namespace ember::distributed::testing
