// Configurations no other suite covers: world size 1, float32 and float64 parameters in
// one model, zero_grad(set_to_none) with gradient_as_bucket_view, sparse gradients and comm hooks
// with find_unused_parameters, PowerSGD over several buckets and across the bucket rebuild, and
// ranks whose gradients become ready in different orders. Each checks equivalence with one
// process training on the whole batch (1e-5 relative unless the hook compresses), and runs at
// 1, 2, 3 and 4 ranks.
#include "distributed/hooks/default_hooks.h"
#include "distributed/hooks/powersgd_hook.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

constexpr double kRtol = 1e-5;

class DdpConfigurations : public MpiTest {
 protected:
  void check(const Scenario& sc, double rtol = kRtol) {
    auto ddp = train_ddp(sc, rank_, world_);
    EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), rtol));
    EXPECT_TRUE(ranks_agree(ddp->module()->parameters()));
  }
  ::testing::AssertionResult ranks_agree(const std::vector<Tensor>& params) { return testing::ranks_agree(*pg_, params); }
};

TEST_F(DdpConfigurations, PlainMlpAtEveryWorldSize) { check(mlp_scenario()); }

// A float32 layer feeding a float64 one: two buckets by dtype from the first iteration on.
struct MixedPrecision : nn::Module {
  std::shared_ptr<nn::Linear> fc32, fc64;
  explicit MixedPrecision(uint64_t seed) : nn::Module("MixedPrecision") {
    Generator g(seed);
    fc32 = register_module("fc32", std::make_shared<nn::Linear>(6, 8, true, &g));
    fc64 = register_module("fc64", std::make_shared<nn::Linear>(8, 4, true, &g));
    fc64->to(kFloat64);
  }
  Tensor forward(const Tensor& x) override {
    return fc64->forward(relu(fc32->forward(x)).to(kFloat64)).to(kFloat32);
  }
};

TEST_F(DdpConfigurations, Float32AndFloat64Parameters) {
  Scenario sc = mlp_scenario();
  sc.make_model = [](uint64_t seed) { return std::make_shared<MixedPrecision>(seed); };
  for (bool as_view : {false, true}) {
    sc.options.gradient_as_bucket_view = as_view;
    auto ddp = train_ddp(sc, rank_, world_);
    EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), kRtol));
    DDPLoggingData d = ddp->get_ddp_logging_data();
    EXPECT_EQ(d.initial_bucket_indices.size(), 2u);
    EXPECT_EQ(d.num_buckets, 2);
    auto* m = dynamic_cast<MixedPrecision*>(ddp->module().get());
    EXPECT_EQ(m->fc64->weight().grad().dtype(), kFloat64);
  }
}

// Note [Straggler check]: every 2nd synchronising iteration the ranks probe their ring neighbours'
// links and compare; training is unchanged. On one host no probe crosses a network, so no link is
// judged (tests/scripts/cluster_test.sh names a slowed host across namespaces).
TEST_F(DdpConfigurations, StragglerCheckRunsEveryNIterationsWithoutChangingTheResult) {
  Scenario sc = mlp_scenario();
  sc.options.straggler_check_every = 2;
  sc.options.straggler_probe_bytes = 64 << 10;
  auto ddp = train_ddp(sc, rank_, world_);  // 5 iterations: checks before the 3rd and the 5th
  EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), kRtol));
  const StragglerReport& r = ddp->straggler_report();
  EXPECT_EQ(r.iteration, 4);
  ASSERT_EQ(r.ranks.size(), static_cast<size_t>(world_));
  ASSERT_EQ(r.hosts.size(), static_cast<size_t>(world_));
  for (int k = 0; k < world_; ++k) {
    EXPECT_GT(r.ranks[k].compute_ms, 0.0) << "rank " << k;
    if (world_ > 1) {
      EXPECT_GT(r.ranks[k].link_next_mb_s, 0.0) << "rank " << k << "'s probe failed";
      EXPECT_GT(r.ranks[k].link_prev_mb_s, 0.0) << "rank " << k << "'s probe failed";
      EXPECT_EQ(r.hosts[k], r.hosts[0]);
    }
  }
  EXPECT_TRUE(r.slow_link_ranks.empty());
  EXPECT_EQ(r.median_link_mb_s, 0.0) << "probes between ranks of one host are no evidence";
  EXPECT_EQ(ddp->get_ddp_logging_data().straggler.iteration, 4);
}

// set_to_none drops .grad; the next finalize makes it the bucket view again (same storage every
// step once the buckets are rebuilt), and results match.
TEST_F(DdpConfigurations, ZeroGradSetToNoneWithGradientAsBucketView) {
  for (bool set_to_none : {true, false}) {
    auto model = mlp(1234 + rank_);
    DDPOptions o;
    o.gradient_as_bucket_view = true;
    auto ddp = std::make_shared<DistributedDataParallel>(model, o);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    auto ref = mlp(1234);
    optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    const auto batches = random_batches({6}, 4);
    std::vector<const void*> last;
    for (int step = 0; step < 4; ++step) {
      auto batch = batches(step, world_ * 4);
      auto shard = rows(batch, rank_ * 4, 4);
      ddp->zero_grad(set_to_none);
      if (set_to_none && step > 0) {
        EXPECT_FALSE(model->parameters()[0].grad().defined());
      }
      nn::functional::cross_entropy(ddp->forward(shard.first), shard.second).backward();
      std::vector<const void*> now;
      for (const Tensor& p : model->parameters()) now.push_back(p.grad().data_ptr());
      if (step >= 2) {
        EXPECT_EQ(now, last) << "step " << step << ": .grad is no longer the bucket view";
      }
      last = now;
      opt.step();
      reference_step(ref_opt, world_, [&](int r) {
        auto s = rows(batch, r * 4, 4);
        return nn::functional::cross_entropy(ref->forward(s.first), s.second);
      });
    }
    EXPECT_TRUE(parameters_match(model->parameters(), ref->parameters(), kRtol)) << "set_to_none=" << set_to_none;
  }
}

// A sparse embedding used on shards < emb_on (the others take a dense path), and a dense branch
// never used.
struct SparseAndBranches : nn::Module, ShardAware {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::Linear> dense, never, head;
  int emb_on = 1 << 20;
  explicit SparseAndBranches(uint64_t seed) : nn::Module("SparseAndBranches") {
    Generator g(seed);
    emb = register_module("emb", std::make_shared<nn::Embedding>(20, 6, /*sparse=*/true, &g));
    dense = register_module("dense", std::make_shared<nn::Linear>(3, 6, true, &g));
    never = register_module("never", std::make_shared<nn::Linear>(6, 6, true, &g));
    head = register_module("head", std::make_shared<nn::Linear>(6, 4, true, &g));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = shard < emb_on ? mean(emb->forward(ids), {1}) : dense->forward(ids.to(kFloat32));
    return head->forward(h);
  }
};

TEST_F(DdpConfigurations, SparseGradientsWithFindUnusedParameters) {
  for (int emb_on : {1 << 20, 1}) {  // the embedding used on every rank, then on rank 0 only
    Scenario sc;
    sc.make_model = [emb_on](uint64_t seed) {
      auto m = std::make_shared<SparseAndBranches>(seed);
      m->emb_on = emb_on;
      return m;
    };
    sc.make_batch = [](int step, int64_t rows) {
      Generator g(500 + step);
      return std::make_pair(randint(0, 20, {rows, 3}, &g), randint(0, 4, {rows}, &g));
    };
    sc.sparse = true;
    sc.options.find_unused_parameters = true;
    auto ddp = train_ddp(sc, rank_, world_);
    EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), kRtol))
        << "emb_on=" << emb_on;
    auto* m = dynamic_cast<SparseAndBranches*>(ddp->module().get());
    EXPECT_TRUE(m->emb->named_parameters()[0].second.grad().is_sparse());
    EXPECT_FALSE(m->never->weight().grad().defined());
  }
}

TEST_F(DdpConfigurations, CommHooksWithFindUnusedParameters) {
  struct Case {
    BuiltinCommHookType hook;
    double max_abs_diff;
  };
  for (const Case& c : {Case{BuiltinCommHookType::kAllreduce, 1e-6}, Case{BuiltinCommHookType::kFp16Compress, 2e-3}}) {
    Scenario sc = mlp_scenario();
    sc.make_model = [](uint64_t seed) {
      auto m = std::make_shared<Branchy>(seed);
      m->use_branch_on = 1;  // the branch on rank 0 only, "never" nowhere
      return m;
    };
    sc.options.find_unused_parameters = true;
    sc.options.bucket_cap_mb = 1e-6;  // one parameter per bucket
    sc.options.first_bucket_mb = 1e-6;
    sc.setup = [&](DistributedDataParallel& ddp) { ddp.register_builtin_comm_hook(c.hook); };
    auto ddp = train_ddp(sc, rank_, world_);
    std::vector<Tensor> got = ddp->module()->parameters(), want = reference_parameters(sc, world_);
    for (size_t i = 0; i < got.size(); ++i) {
      const double diff = max(abs(sub(got[i], want[i]))).item<double>();
      EXPECT_LE(diff, c.max_abs_diff) << ddp->get_ddp_logging_data().comm_hook << " parameter " << i;
    }
    EXPECT_TRUE(ranks_agree(got));
  }
}

// PowerSGD's result is linear in the sum of the ranks' gradients (P = (sum M_r) Q, and the
// residuals add up), so N ranks must match one process running the same hook, the same buckets and
// the same Q draws on the whole batch -- at rank 1, where no Gram-Schmidt noise column can appear.
// Bucket layout: one bucket in the first iteration, one per parameter after the rebuild; with error
// feedback and warm start (start_powerSGD_iter = 2, after the rebuild) and without (from the start,
// so across the rebuild).
TEST_F(DdpConfigurations, PowerSGDWithSeveralBucketsAndAcrossTheRebuild) {
  // A group of this rank alone, for the one-process run (every rank creates every such group).
  ProcessGroupPtr alone;
  for (int r = 0; r < world_; ++r) {
    if (ProcessGroupPtr g = new_group({r})) alone = g;
  }
  ASSERT_NE(alone, nullptr);
  // Trains with DDP over `group` on shards [first_shard, first_shard + num_shards) of each global
  // batch (forward per shard, one backward of their mean: how one process computes DDP's average).
  auto train = [&](ProcessGroupPtr group, int first_shard, int num_shards, int64_t start_iter, bool memory) {
    auto model = mlp(1234 + 5 * first_shard);
    DDPOptions o;
    o.process_group = group;
    o.bucket_cap_mb = 1e-6;
    o.first_bucket_mb = 1e-6;
    auto ddp = std::make_shared<DistributedDataParallel>(model, o);
    auto state = std::make_shared<PowerSGDState>(group,
        PowerSGDOptions().start_powerSGD_iter(start_iter).min_compression_rate(0.1).use_error_feedback(memory).warm_start(memory));
    ddp->register_comm_hook<PowerSGDState>(state, powerSGD_hook, "powerSGD");
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    const auto batches = random_batches({6}, 4);
    for (int step = 0; step < 5; ++step) {
      auto batch = batches(step, world_ * 4);
      opt.zero_grad();
      Tensor loss;
      for (int k = 0; k < num_shards; ++k) {
        auto shard = rows(batch, (first_shard + k) * 4, 4);
        Tensor l = nn::functional::cross_entropy(ddp->forward(shard.first), shard.second);
        loss = loss.defined() ? add(loss, l) : l;
      }
      div(loss, static_cast<double>(num_shards)).backward();
      opt.step();
    }
    EXPECT_EQ(ddp->get_ddp_logging_data().num_buckets, 6);
    EXPECT_EQ(state->iter, 5);
    auto [rate, before, after] = state->compression_stats();
    EXPECT_GT(rate, 1.0) << "PowerSGD did not compress (" << before << " -> " << after << " elements)";
    return model->parameters();
  };
  for (int64_t start_iter : {0, 2}) {
    const bool memory = start_iter > 0;  // error feedback and warm start need start_iter >= 2
    std::vector<Tensor> got = train(pg_, rank_, 1, start_iter, memory);
    std::vector<Tensor> want = train(alone, 0, world_, start_iter, memory);
    EXPECT_TRUE(parameters_match(got, want, 1e-4)) << "start_powerSGD_iter=" << start_iter;
    EXPECT_TRUE(ranks_agree(got));
  }
}

// Two parallel branches computed in a rank-dependent order: autograd then produces their
// gradients in a different order on odd and even ranks; buckets still launch in one order.
struct Parallel : nn::Module, ShardAware {
  std::shared_ptr<nn::Linear> a, b, head;
  explicit Parallel(uint64_t seed) : nn::Module("Parallel") {
    Generator g(seed);
    a = register_module("a", std::make_shared<nn::Linear>(6, 8, true, &g));
    b = register_module("b", std::make_shared<nn::Linear>(6, 8, true, &g));
    head = register_module("head", std::make_shared<nn::Linear>(8, 4, true, &g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor ha, hb;
    if (shard % 2 == 0) {
      ha = relu(a->forward(x));
      hb = relu(b->forward(x));
    } else {
      hb = relu(b->forward(x));
      ha = relu(a->forward(x));
    }
    return head->forward(add(ha, hb));
  }
};

TEST_F(DdpConfigurations, GradientsReadyInDifferentOrdersOnDifferentRanks) {
  Scenario sc = mlp_scenario();
  sc.make_model = [](uint64_t seed) { return std::make_shared<Parallel>(seed); };
  sc.options.bucket_cap_mb = 1e-6;
  sc.options.first_bucket_mb = 1e-6;
  check(sc);
}

}  // namespace
}  // namespace ember::distributed::testing
