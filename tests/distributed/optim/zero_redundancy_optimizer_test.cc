// ZeroRedundancyOptimizer under mpirun (2, 3, 4 ranks): after k steps, ZeRO with SGD-momentum,
// Adam (AMSGrad, L2 weight decay) and AdamW, with and without overlap_with_ddp, with the
// parameters broadcast or allgathered, holds the unsharded optimizer's parameters bit for bit (the
// same arithmetic on the same allreduced gradients, done once, then copied), also with ranks that
// own nothing; each rank keeps only its shard's state; the consolidated state dict is the
// unsharded optimizer's; a checkpoint written at 2 ranks resumes at 3 and 4.
#include <tuple>
#include <utility>

#include "distributed/optim/state_dict_broadcast.h"
#include "nn/checkpoint.h"
#include "tests/distributed/optim/zero_test_util.h"

namespace ember::distributed::testing {
namespace {

// (optimizer, overlap_with_ddp, tiny model, parameters by allgather)
class ZeroEquivalenceTest : public MpiTest,
                            public ::testing::WithParamInterface<std::tuple<Kind, bool, bool, bool>> {};

TEST_P(ZeroEquivalenceTest, MatchesTheUnshardedOptimizerBitForBit) {
  const auto [kind, overlap, tiny, allgather] = GetParam();
  ZeroRedundancyOptimizerOptions options;
  options.parameter_exchange = allgather ? ParameterExchangeMode::kAllgather : ParameterExchangeMode::kBroadcast;
  Trainer ref(pg_, kind, Mode::kUnsharded, tiny);
  Trainer zero(pg_, kind, overlap ? Mode::kZeroOverlap : Mode::kZero, tiny, nullptr, options);
  ref.train(0, 5);
  zero.train(0, 5);
  EXPECT_TRUE(bitwise_equal(zero.model->parameters(), ref.model->parameters()));
  EXPECT_TRUE(ranks_agree(*pg_, zero.model->parameters()));
  // The hook did the stepping in every iteration: nothing fell back to the plain step.
  EXPECT_EQ(zero.zero()->steps_taken_by_hook(), overlap ? 5 : 0);
}

INSTANTIATE_TEST_SUITE_P(
    KindsAndModes, ZeroEquivalenceTest,
    ::testing::Combine(::testing::Values(Kind::kSgdMomentum, Kind::kAdam, Kind::kAdamW), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::string(kind_name(std::get<0>(info.param))) + (std::get<1>(info.param) ? "Overlap" : "") +
             (std::get<2>(info.param) ? "Tiny" : "") + (std::get<3>(info.param) ? "Allgather" : "");
    });

class ZeroTest : public MpiTest {};

// The updated parameters through flat buckets of 1 KiB (several per rank; under the hook, one flat
// copy per owner and DDP bucket), broadcast (broadcast_coalesced) or allgathered, instead of in
// place, one per parameter, or of one allgather over 25 MiB: the same bits.
TEST_F(ZeroTest, BucketedExchangeMatchesToo) {
  Trainer ref(pg_, Kind::kAdamW, Mode::kUnsharded);
  ref.train(0, 4);
  for (auto [mode, exchange] : {std::pair{Mode::kZero, ParameterExchangeMode::kBroadcast},
                                std::pair{Mode::kZeroOverlap, ParameterExchangeMode::kBroadcast},
                                std::pair{Mode::kZero, ParameterExchangeMode::kAllgather}}) {
    ZeroRedundancyOptimizerOptions options;
    options.broadcast_bucket_bytes = 1024;
    options.parameter_exchange = exchange;
    Trainer zero(pg_, Kind::kAdamW, mode, false, nullptr, options);
    zero.train(0, 4);
    EXPECT_TRUE(bitwise_equal(zero.model->parameters(), ref.model->parameters()))
        << (mode == Mode::kZero ? "zero" : "zero overlapped")
        << (exchange == ParameterExchangeMode::kAllgather ? ", allgather" : ", broadcast");
    EXPECT_TRUE(ranks_agree(*pg_, zero.model->parameters()));
  }
}

// Each rank holds AdamW's exp_avg and exp_avg_sq (and step) for its own parameters only; together
// the ranks hold exactly the unsharded optimizer's bytes, and the partition is uneven.
TEST_F(ZeroTest, EachRankKeepsOnlyItsShardsState) {
  Trainer ref(pg_, Kind::kAdamW, Mode::kUnsharded);
  Trainer zero(pg_, Kind::kAdamW, Mode::kZero);
  ref.train(0, 1);
  zero.train(0, 1);
  ZeroRedundancyOptimizer& z = *zero.zero();
  int64_t expect = 0;
  const auto all = z.parameters();  // the groups' order, which the partition numbers
  for (size_t i : z.partition().per_rank[rank_]) expect += 2 * all[i].nbytes() + 8;
  EXPECT_EQ(z.local_state_bytes(), expect);
  int64_t unsharded = 0;
  for (const Tensor& p : ref.opt->parameters()) unsharded += 2 * p.nbytes() + 8;
  std::vector<Tensor> total{from_vector<int64_t>({z.local_state_bytes()}, {1})};
  pg_->allreduce(total)->wait();
  EXPECT_EQ(total[0].item<int64_t>(), unsharded);
  if (world_ > 1) {
    const auto& n = z.partition().numel_per_rank;
    EXPECT_NE(*std::min_element(n.begin(), n.end()), *std::max_element(n.begin(), n.end()));
  }
}

// consolidate_state_dict(to) gives rank `to` the unsharded optimizer's state dict, same keys in the
// same order and the same bits; the other ranks get a clear error from state_dict().
TEST_F(ZeroTest, ConsolidatedStateDictIsTheUnshardedOne) {
  for (Kind kind : {Kind::kSgdMomentum, Kind::kAdamW}) {
    Trainer ref(pg_, kind, Mode::kUnsharded);
    Trainer zero(pg_, kind, Mode::kZero);
    ref.train(0, 3);
    zero.train(0, 3);
    const int to = world_ - 1;
    zero.zero()->consolidate_state_dict(to);
    if (rank_ != to) {
      EXPECT_EMBER_ERROR(zero.opt->state_dict(), "rank " + std::to_string(rank_), "holds no consolidated state");
      continue;
    }
    const nn::StateDict got = zero.opt->state_dict(), want = ref.opt->state_dict();
    ASSERT_EQ(got.size(), want.size()) << kind_name(kind);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first);
      EXPECT_TRUE(equal(got[i].second, want[i].second)) << got[i].first;
    }
  }
}

// A state dict loaded on every rank (as from a checkpoint file): each keeps its shard, and training
// goes on exactly as the unsharded optimizer's does; the lr schedule resumes with it. The reference
// resumes too: a fresh DDP starts with other buckets, and above 2 ranks an allreduce's sum depends
// on the buffer it reduces, so both sides must meet the same bucket layouts to agree bit for bit.
TEST_F(ZeroTest, LoadStateDictThenContinue) {
  for (bool overlap : {false, true}) {
    Trainer ref(pg_, Kind::kAdamW, Mode::kUnsharded);
    Trainer zero(pg_, Kind::kAdamW, Mode::kZero);
    ref.train(0, 3);
    zero.train(0, 3);
    zero.zero()->consolidate_state_dict(0);
    const nn::StateDict zckpt = broadcast_state_dict(*pg_, rank_ == 0 ? zero.checkpoint() : nn::StateDict{}, 0);
    const nn::StateDict rckpt = broadcast_state_dict(*pg_, rank_ == 0 ? ref.checkpoint() : nn::StateDict{}, 0);
    const nn::StateDict zmodel = with_prefix_removed(zckpt, "model."), rmodel = with_prefix_removed(rckpt, "model.");
    Trainer zresumed(pg_, Kind::kAdamW, overlap ? Mode::kZeroOverlap : Mode::kZero, false, &zmodel);
    Trainer rresumed(pg_, Kind::kAdamW, Mode::kUnsharded, false, &rmodel);
    zresumed.opt->load_state_dict(with_prefix_removed(zckpt, "optimizer."));
    zresumed.sched->load_state_dict(with_prefix_removed(zckpt, "scheduler."));
    rresumed.opt->load_state_dict(with_prefix_removed(rckpt, "optimizer."));
    rresumed.sched->load_state_dict(with_prefix_removed(rckpt, "scheduler."));
    rresumed.train(3, 3);
    zresumed.train(3, 3);
    EXPECT_TRUE(bitwise_equal(zresumed.model->parameters(), rresumed.model->parameters())) << "overlap " << overlap;
  }
}

TEST_F(ZeroTest, LoadRejectsAStateDictOfAnotherModel) {
  Trainer zero(pg_, Kind::kAdamW, Mode::kZero);
  Trainer tiny(pg_, Kind::kAdamW, Mode::kUnsharded, /*tiny=*/true);
  tiny.train(0, 1);
  EXPECT_EMBER_ERROR(zero.opt->load_state_dict(tiny.opt->state_dict()), "parameter group 0 has 4 parameters");
}

// Saved at 2 ranks (ranks 0 and 1 of the world), resumed at the world's size: the consolidated
// checkpoint does not depend on the world size. The reference does the same with the unsharded
// optimizer, so the two runs use the same gradients at every step and must agree bit for bit.
TEST_F(ZeroTest, CheckpointSavedAtTwoRanksResumesAtMore) {
  if (world_ < 3) GTEST_SKIP() << "needs at least 3 ranks";
  for (Kind kind : {Kind::kSgdMomentum, Kind::kAdamW}) {
    const std::string zpath = tmp_path(std::string("zero_") + kind_name(kind) + ".ckpt");
    const std::string rpath = tmp_path(std::string("ref_") + kind_name(kind) + ".ckpt");
    ProcessGroupPtr pair = pg_->new_subgroup({0, 1}, ProcessGroup::Options{});
    if (pair != nullptr) {
      Trainer ref(pair, kind, Mode::kUnsharded);
      Trainer zero(pair, kind, Mode::kZero);
      ref.train(0, 3);
      zero.train(0, 3);
      zero.zero()->consolidate_state_dict(0);
      if (pair->rank() == 0) {
        nn::save(zero.checkpoint(), zpath);
        nn::save(ref.checkpoint(), rpath);
      }
    }
    pg_->barrier()->wait();
    const nn::StateDict zckpt = nn::load(zpath), rckpt = nn::load(rpath);
    const nn::StateDict zmodel = with_prefix_removed(zckpt, "model."), rmodel = with_prefix_removed(rckpt, "model.");
    Trainer ref(pg_, kind, Mode::kUnsharded, false, &rmodel);
    Trainer zero(pg_, kind, kind == Kind::kAdamW ? Mode::kZeroOverlap : Mode::kZero, false, &zmodel);
    ref.opt->load_state_dict(with_prefix_removed(rckpt, "optimizer."));
    ref.sched->load_state_dict(with_prefix_removed(rckpt, "scheduler."));
    zero.opt->load_state_dict(with_prefix_removed(zckpt, "optimizer."));
    zero.sched->load_state_dict(with_prefix_removed(zckpt, "scheduler."));
    ref.train(3, 3);
    zero.train(3, 3);
    EXPECT_TRUE(bitwise_equal(zero.model->parameters(), ref.model->parameters())) << kind_name(kind);
    pg_->barrier()->wait();
  }
}

TEST_F(ZeroTest, OverlapHookNeedsOverlapWithDdp) {
  Trainer zero(pg_, Kind::kAdamW, Mode::kZero);
  EXPECT_EMBER_ERROR(ZeroStepCommHook(*zero.zero()), "built without overlap_with_ddp");
}

TEST_F(ZeroTest, ConsolidateRejectsARankOutsideTheGroup) {
  Trainer zero(pg_, Kind::kAdamW, Mode::kZero);
  EXPECT_EMBER_ERROR(zero.zero()->consolidate_state_dict(world_),
                     "rank " + std::to_string(world_) + " is not in a group of");
}

}  // namespace
}  // namespace ember::distributed::testing
