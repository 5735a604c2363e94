// Join for uneven inputs: ranks with 3, 5 and 8 batches (and 1, at four ranks) train
// under Join, finish without hanging, and end with what PyTorch's Join semantics give, computed in
// one process by join_reference below:
//   - in iteration t the ranks still training are A_t = {r : batches(r) > t}; each of them gets the
//     gradient sum_{r in A_t} grad_r / D, with D = world size (divide_by_initial_world_size, the
//     default) or |A_t|; joined ranks contribute zeros and take no optimizer step;
//   - buffers are broadcast before each forward from the highest rank in A_t (not rank 0, which
//     may have joined with stale buffers);
//   - find_unused_parameters: a joined rank sends its last (globally reduced) used-parameter map,
//     reduced in place at every shadowed iteration (PyTorch's _match_unused_params_allreduce), so
//     once a rank joined, a parameter counts as used in t if used in t or counted used in t - 1;
//     such a parameter that no rank in A_t used gets a zero gradient instead of none;
//   - when all joined, every rank takes the parameters and buffers of the highest rank among those
//     that joined last.
// Tolerance: float32 training, relative 1e-5 (absolute 1e-6) per element.
#include <algorithm>
#include <chrono>

#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kPerRank = 4;
constexpr double kRtol = 1e-5;

struct JoinCase {
  std::function<std::shared_ptr<nn::Module>(uint64_t seed)> make_model = mlp;
  std::vector<int> batches = {3, 5, 8, 1};  // rank r trains on batches[r % size()] batches
  JoinOptions join;
  DDPOptions ddp;
  // > 1: each batch is that many micro-batches, all but the last under no_sync (models without
  // buffers only: the reference does not model the skipped buffer broadcasts).
  int micro_batches = 1;
};

int batches_of(const JoinCase& c, int rank) { return c.batches[rank % c.batches.size()]; }

std::pair<Tensor, Tensor> shard(int t, int rank, int world) {
  auto batch = rows(random_batches({6}, 4)(t, world * kPerRank), rank * kPerRank, kPerRank);
  return batch;
}

struct Trajectory {
  std::vector<std::vector<Tensor>> grads;  // per iteration, per parameter
  std::vector<Tensor> params, buffers;     // at the end
};

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.defined() ? t.clone() : Tensor());
  return out;
}

void assign(const std::vector<Tensor>& dst, const std::vector<Tensor>& src) {
  NoGradGuard g;
  for (size_t i = 0; i < dst.size(); ++i) copy_(dst[i], src[i]);
}

// The single-process reference of the header's semantics.
Trajectory join_reference(const JoinCase& c, int world) {
  auto model = c.make_model(1234);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  int steps = 0;
  for (int r = 0; r < world; ++r) steps = std::max(steps, batches_of(c, r));
  auto active = [&](int t) {
    std::vector<int> a;
    for (int r = 0; r < world; ++r)
      if (batches_of(c, r) > t) a.push_back(r);
    return a;
  };
  Trajectory out;
  std::vector<Tensor> buffers = clones(model->buffers());
  std::vector<bool> counted_used(model->parameters().size(), false);  // the previous global used map
  for (int t = 0; t < steps; ++t) {
    const std::vector<int> a = active(t);
    // Whose buffers the next forward starts from: the highest rank training in t + 1, or, after
    // the last iteration, the final sync's source (the highest rank among the last joiners).
    const int next_source = t + 1 < steps ? active(t + 1).back() : a.back();
    const double divisor = c.join.divide_by_initial_world_size ? world : static_cast<double>(a.size());
    std::vector<Tensor> next_buffers = buffers;
    opt.zero_grad();
    for (int r : a) {
      assign(model->buffers(), buffers);
      set_shard(*model, r);
      for (int mb = 0; mb < c.micro_batches; ++mb) {
        auto s = shard(t * c.micro_batches + mb, r, world);
        div(nn::functional::cross_entropy(model->forward(s.first), s.second), divisor).backward();
      }
      if (r == next_source) next_buffers = clones(model->buffers());
    }
    buffers = next_buffers;
    if (c.ddp.find_unused_parameters) {
      const bool someone_joined = static_cast<int>(a.size()) < world;
      const std::vector<Tensor> params = model->parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        const bool used = params[i].grad().defined() || (someone_joined && counted_used[i]);
        if (used && !params[i].grad().defined()) params[i].mutable_grad() = zeros_like(params[i]);
        counted_used[i] = used;
      }
    }
    std::vector<Tensor> grads;
    for (const Tensor& p : model->parameters())
      grads.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    out.grads.push_back(grads);
    opt.step();
  }
  out.params = model->parameters();
  out.buffers = buffers;
  return out;
}

class DdpJoin : public MpiTest {
 protected:
  // Trains this rank's batches under Join; returns its gradients per iteration and final state.
  Trajectory train(const JoinCase& c) {
    auto model = c.make_model(rank_ == 0 ? 1234 : 1234 + 17 * rank_);
    set_shard(*model, rank_);
    auto ddp = std::make_shared<DistributedDataParallel>(model, c.ddp);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    Trajectory out;
    const auto start = std::chrono::steady_clock::now();
    Join::run({ddp.get()}, c.join, [&] {
      for (int t = 0; t < batches_of(c, rank_); ++t) {
        opt.zero_grad();
        for (int mb = 0; mb < c.micro_batches; ++mb) {
          auto s = shard(t * c.micro_batches + mb, rank_, world_);
          if (mb + 1 < c.micro_batches) {
            auto no_sync = ddp->no_sync();
            nn::functional::cross_entropy(ddp->forward(s.first), s.second).backward();
          } else {
            nn::functional::cross_entropy(ddp->forward(s.first), s.second).backward();
          }
        }
        out.grads.push_back(clones([&] {
          std::vector<Tensor> g;
          for (const Tensor& p : ddp->parameters()) g.push_back(p.grad());
          return g;
        }()));
        opt.step();
      }
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
    out.params = ddp->parameters();
    out.buffers = model->buffers();
    int last = 0;
    for (int r = 0; r < world_; ++r) {
      if (batches_of(c, r) >= batches_of(c, last)) last = r;
    }
    EXPECT_EQ(ddp->authoritative_rank(), c.join.enable ? last : -1);  // no final sync when disabled
    EXPECT_TRUE(ddp->get_ddp_logging_data().join_uneven_inputs);
    return out;
  }

  void expect_matches_reference(const JoinCase& c) {
    const Trajectory want = join_reference(c, world_);
    const Trajectory got = train(c);
    ASSERT_EQ(got.grads.size(), static_cast<size_t>(batches_of(c, rank_)));
    for (size_t t = 0; t < got.grads.size(); ++t) {
      for (size_t i = 0; i < got.grads[t].size(); ++i) {
        ASSERT_EQ(got.grads[t][i].defined(), want.grads[t][i].defined())
            << "iteration " << t << " parameter " << i;
      }
      std::vector<Tensor> g, w;
      for (size_t i = 0; i < got.grads[t].size(); ++i) {
        if (got.grads[t][i].defined()) {
          g.push_back(got.grads[t][i]);
          w.push_back(want.grads[t][i]);
        }
      }
      EXPECT_TRUE(parameters_match(g, w, kRtol)) << "gradients of iteration " << t;
    }
    EXPECT_TRUE(parameters_match(got.params, want.params, kRtol)) << "final parameters";
    EXPECT_TRUE(parameters_match(got.buffers, want.buffers, kRtol)) << "final buffers";
  }
};

TEST_F(DdpJoin, UnevenBatchesDivideByInitialWorldSize) { expect_matches_reference(JoinCase{}); }

TEST_F(DdpJoin, UnevenBatchesDivideByRanksStillTraining) {
  JoinCase c;
  c.join.divide_by_initial_world_size = false;
  expect_matches_reference(c);
}

// Several buckets (rebuilt after the first iteration) and gradients as bucket views: a joined
// rank's zeros must follow the rebuilt layout.
TEST_F(DdpJoin, SeveralBucketsAndBucketViews) {
  JoinCase c;
  c.ddp.bucket_cap_mb = 400.0 / (1024 * 1024);
  c.ddp.first_bucket_mb = 200.0 / (1024 * 1024);
  c.ddp.gradient_as_bucket_view = true;
  expect_matches_reference(c);
}

// static_graph: after its first iteration (delay_all_reduce) the layout is the rebuilt one, which
// the joined ranks shadow (every rank must train at least once before it joins).
TEST_F(DdpJoin, StaticGraph) {
  JoinCase c;
  c.ddp.static_graph = true;
  expect_matches_reference(c);
}

// Gradient accumulation: the no_sync micro-batches tell joined ranks (through the "backward
// synchronises" allreduce) to skip shadowing that backward.
TEST_F(DdpJoin, NoSyncMicroBatches) {
  JoinCase c;
  c.micro_batches = 3;
  expect_matches_reference(c);
}

// find_unused_parameters: Branchy's branch is used only on rank 0's shards and rank 0 stops first;
// after that no rank uses it, but the joined rank's stale used map keeps it "used", so it gets zero
// gradients (and momentum keeps moving it), as in PyTorch; "never" is unused throughout and keeps
// no gradient.
TEST_F(DdpJoin, UnusedParametersShadowTheUsedMap) {
  JoinCase c;
  c.make_model = [](uint64_t seed) {
    auto m = std::make_shared<Branchy>(seed);
    m->use_branch_on = 1;
    return m;
  };
  c.ddp.find_unused_parameters = true;
  expect_matches_reference(c);
}

// Buffers (BatchNorm running statistics) come from the highest rank still training: the highest
// ranks stop first here, so the source moves from rank world-1 down to rank 0.
TEST_F(DdpJoin, BuffersComeFromTheHighestRankStillTraining) {
  JoinCase c;
  c.batches = {8, 5, 3, 1};
  c.make_model = mlp_with_batch_norm;
  expect_matches_reference(c);
}

// throw_on_early_termination: the first rank out of data throws from Join::finish, every other
// rank from its next forward; nobody hangs.
TEST_F(DdpJoin, ThrowOnEarlyTermination) {
  JoinCase c;
  c.join.throw_on_early_termination = true;
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] { train(c); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  int first = 0;
  for (int r = 0; r < world_; ++r) {
    if (batches_of(c, r) < batches_of(c, first)) first = r;
  }
  if (batches_of(c, rank_) == batches_of(c, first)) {
    EXPECT_THAT(msg, HasSubstr("Rank " + std::to_string(rank_) + " exhausted all inputs"));
  } else {
    EXPECT_THAT(msg,
                HasSubstr("Detected at least one rank that exhausted inputs. Throwing across all ranks"));
  }
}

// Join's constructor checks its joinables.
TEST_F(DdpJoin, JoinNeedsJoinablesOfOneGroup) {
  EXPECT_THAT(error_of([] { Join j({}); }), HasSubstr("requires at least one joinable"));
  auto a = std::make_shared<DistributedDataParallel>(mlp(1));
  DDPOptions other;
  std::vector<int> all(world_);
  for (int r = 0; r < world_; ++r) all[r] = r;
  other.process_group = new_group(all);
  auto b = std::make_shared<DistributedDataParallel>(mlp(1), other);
  EXPECT_THAT(error_of([&] { Join j({a.get(), b.get()}); }), HasSubstr("multiple process groups"));
}

// enable=false: Join does nothing (no notify in forward, no shadowing); even inputs train as usual.
TEST_F(DdpJoin, DisabledJoinIsPlainTraining) {
  JoinCase c;
  c.batches = {4};
  c.join.enable = false;
  expect_matches_reference(c);
}

// After the Join scope a DDP issues no join collectives: plain training continues in step.
TEST_F(DdpJoin, DdpAfterJoinScopeTrainsNormally) {
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(1234));
  {
    Join join({ddp.get()});
    sum(ddp->forward(ones({2, 6}))).backward();
    join.finish();
  }
  EXPECT_FALSE(ddp->join_config().enable);
  for (int it = 0; it < 2; ++it) sum(ddp->forward(ones({2, 6}))).backward();
}

}  // namespace
}  // namespace ember::distributed::testing
