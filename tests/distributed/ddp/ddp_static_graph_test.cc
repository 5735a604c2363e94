// static_graph as PyTorch defines it, and the first iteration's buckets:
// hook counts from the first iteration make reentrant backward legal, the first iteration is
// reduced in one delayed allreduce, the rebuild happens where PyTorch does it, the "marked twice"
// error lists only the causes that apply, and the bucket layout before and after the rebuild.
#include "nn/models/resnet.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kRtol = 1e-5;

class DdpStaticGraph : public MpiTest {};

// The hidden activation's hook runs a reentrant backward of a side loss through fc2 (as activation
// checkpointing re-runs part of the model inside backward): fc2.weight's hook fires twice per
// iteration. `side_scale` weighs the side loss. With `extra`, the side loss runs through that layer
// instead, which the graph traversal from the outputs then finds unused.
struct ReentrantNet : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, extra;
  double side_scale = 1.0;
  bool reenter = true;
  ReentrantNet(uint64_t seed, bool with_extra) : nn::Module("ReentrantNet") {
    Generator g(seed);
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8, true, &g));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 4, false, &g));
    if (with_extra) extra = register_module("extra", std::make_shared<nn::Linear>(8, 8, false, &g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(fc1->forward(x));
    if (reenter) {
      Tensor side_out = extra ? extra->forward(ones({1, 8})) : fc2->forward(ones({1, 8}));
      Tensor side = mul(sum(side_out), side_scale);
      h.register_hook([side](const Tensor& grad) {
        side.backward();
        return grad;
      });
    }
    return fc2->forward(h);
  }
};

TEST_F(DdpStaticGraph, ReentrantBackwardTrainsLikeOneProcess) {
  const auto batches = random_batches({6}, 4);
  const int64_t per_rank = 4;
  auto model = std::make_shared<ReentrantNet>(1234 + rank_, false);
  DDPOptions o;
  o.static_graph = true;
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  // One process runs the side backward once per shard: scaled so it adds up to one side loss, the
  // average DDP computes.
  auto ref = std::make_shared<ReentrantNet>(1234, false);
  ref->side_scale = 1.0 / world_;
  optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    auto batch = batches(step, world_ * per_rank);
    auto shard = rows(batch, rank_ * per_rank, per_rank);
    opt.zero_grad();
    ASSERT_NO_THROW(nn::functional::cross_entropy(ddp->forward(shard.first), shard.second).backward()) << step;
    opt.step();
    reference_step(ref_opt, world_, [&](int r) {
      auto s = rows(batch, r * per_rank, per_rank);
      return nn::functional::cross_entropy(ref->forward(s.first), s.second);
    });
  }
  EXPECT_TRUE(parameters_match(model->parameters(), ref->parameters(), kRtol));
  EXPECT_TRUE(ddp->get_ddp_logging_data().has_rebuilt_buckets);
}

// A branch that is never used: known unused from the first iteration's hook counts (no graph
// traversal under static_graph), its .grad stays undefined.
struct NeverUsed : nn::Module {
  std::shared_ptr<nn::Linear> fc, never, head;
  explicit NeverUsed(uint64_t seed) : nn::Module("NeverUsed") {
    Generator g(seed);
    fc = register_module("fc", std::make_shared<nn::Linear>(6, 8, true, &g));
    never = register_module("never", std::make_shared<nn::Linear>(8, 8, true, &g));
    head = register_module("head", std::make_shared<nn::Linear>(8, 4, true, &g));
  }
  Tensor forward(const Tensor& x) override { return head->forward(relu(fc->forward(x))); }
};

TEST_F(DdpStaticGraph, UnusedParametersComeFromTheFirstIterationsCounts) {
  Scenario sc;
  sc.make_model = [](uint64_t seed) { return std::make_shared<NeverUsed>(seed); };
  sc.make_batch = random_batches({6}, 4);
  sc.options.static_graph = true;
  sc.options.gradient_as_bucket_view = true;
  auto ddp = train_ddp(sc, rank_, world_);
  EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), kRtol));
  DDPLoggingData d = ddp->get_ddp_logging_data();
  EXPECT_EQ(d.unused_parameter_names, (std::vector<std::string>{"never.weight", "never.bias"}));
  EXPECT_FALSE(dynamic_cast<NeverUsed*>(ddp->module().get())->never->weight().grad().defined());
}

// skip_all_reduce_unused_params (PyTorch 2.x): the never-used branch's buckets issue no
// allreduce once the unused set is known (static_graph: after its first iteration;
// find_unused_parameters: every iteration), and training still equals one process.
TEST_F(DdpStaticGraph, SkipAllReduceUnusedParamsTrainsLikeOneProcess) {
  for (bool static_graph : {true, false}) {
    Scenario sc;
    sc.make_model = [](uint64_t seed) { return std::make_shared<NeverUsed>(seed); };
    sc.make_batch = random_batches({6}, 4);
    sc.options.static_graph = static_graph;
    sc.options.find_unused_parameters = !static_graph;
    sc.options.skip_all_reduce_unused_params = true;
    sc.options.bucket_cap_mb = 1e-6;  // one parameter per bucket
    sc.options.first_bucket_mb = 1e-6;
    auto ddp = train_ddp(sc, rank_, world_);
    const std::string what = static_graph ? "static_graph" : "find_unused_parameters";
    EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), kRtol)) << what;
    const DDPLoggingData d = ddp->get_ddp_logging_data();
    EXPECT_TRUE(d.has_rebuilt_buckets || !static_graph) << what;
    EXPECT_EQ(d.num_buckets, 6) << what;
    EXPECT_EQ(d.num_buckets_reduced, 4) << what;  // never.weight's and never.bias's skipped
    EXPECT_FALSE(dynamic_cast<NeverUsed*>(ddp->module().get())->never->weight().grad().defined()) << what;
  }
}

// PyTorch rebuilds a static graph's buckets before the third forward (the second iteration
// records the order; the first only counted), any other graph's before the second.
TEST_F(DdpStaticGraph, BucketsRebuiltWherePyTorchRebuildsThem) {
  for (bool static_graph : {false, true}) {
    Generator g(4);
    auto model = nn::make_mlp({6, 8, 4}, &g);
    DDPOptions o;
    o.static_graph = static_graph;
    auto ddp = std::make_shared<DistributedDataParallel>(model, o);
    std::vector<bool> rebuilt_at_forward;
    for (int it = 0; it < 3; ++it) {
      Tensor out = ddp->forward(ones({2, 6}));
      rebuilt_at_forward.push_back(ddp->get_ddp_logging_data().has_rebuilt_buckets);
      sum(out).backward();
    }
    const std::vector<bool> want = static_graph ? std::vector<bool>{false, false, true}
                                                : std::vector<bool>{false, true, true};
    EXPECT_EQ(rebuilt_at_forward, want) << "static_graph=" << static_graph;
  }
}

TEST_F(DdpStaticGraph, GraphChangeIsReportedWithoutSuggestingStaticGraph) {
  auto model = std::make_shared<ReentrantNet>(3, false);
  model->reenter = false;  // first iteration: every hook fires once
  DDPOptions o;
  o.static_graph = true;
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  sum(ddp->forward(ones({2, 6}))).backward();
  model->reenter = true;  // now fc2.weight fires twice
  const std::string msg = error_of([&] { sum(ddp->forward(ones({2, 6}))).backward(); });
  EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(rank_) +
                             "): the gradient hook of parameter 'fc2.weight' (index 2) fired more "
                             "often in this iteration than in the first (1 times)"));
  EXPECT_THAT(msg, HasSubstr("not compatible with static_graph=true"));
  EXPECT_THAT(msg, Not(HasSubstr("static_graph=true supports")));
}

TEST_F(DdpStaticGraph, MarkedTwiceListsOnlyTheCausesThatApply) {
  {  // Reentrant backward over fc2, every parameter used: static_graph would help; no traversal.
    auto ddp = std::make_shared<DistributedDataParallel>(std::make_shared<ReentrantNet>(1, false));
    const std::string msg = error_of([&] { sum(ddp->forward(ones({2, 6}))).backward(); });
    EXPECT_THAT(msg, HasSubstr("Parameter at index 2 with name 'fc2.weight' has been marked as ready twice"));
    EXPECT_THAT(msg, HasSubstr("static_graph=true supports this"));
    EXPECT_THAT(msg, Not(HasSubstr("Incorrect unused-parameter detection")));
  }
  {  // `extra` is found unused by the traversal, then the side loss gives it a gradient.
    DDPOptions o;
    o.find_unused_parameters = true;
    auto ddp = std::make_shared<DistributedDataParallel>(std::make_shared<ReentrantNet>(1, true), o);
    const std::string msg = error_of([&] { sum(ddp->forward(ones({2, 6}))).backward(); });
    EXPECT_THAT(msg, HasSubstr("with name 'extra.weight' has been marked as ready twice"));
    EXPECT_THAT(msg, HasSubstr("3) Incorrect unused-parameter detection"));
  }
}

// ---- the first iteration's buckets (Note [First-iteration buckets]) ---------------------------

class DdpFirstIterationBuckets : public MpiTest {};

TEST_F(DdpFirstIterationBuckets, OneBucketUntilTheRebuildUnlessFindingUnusedParameters) {
  struct Case {
    bool find_unused, static_graph;
    size_t initial, after;
    bool rebuilt;
  };
  for (const Case& c : {Case{false, false, 1, 6, true}, Case{true, false, 6, 6, false},
                        Case{true, true, 1, 6, true}, Case{false, true, 1, 6, true}}) {
    Generator g(8);
    auto model = nn::make_mlp({6, 16, 12, 4}, &g);
    DDPOptions o;
    o.find_unused_parameters = c.find_unused;
    o.static_graph = c.static_graph;
    o.bucket_cap_mb = 1e-6;  // one parameter per bucket once [first, cap] applies
    o.first_bucket_mb = 1e-6;
    auto ddp = std::make_shared<DistributedDataParallel>(model, o);
    for (int it = 0; it < 3; ++it) sum(ddp->forward(ones({2, 6}))).backward();
    (void)ddp->forward(ones({2, 6}));
    DDPLoggingData d = ddp->get_ddp_logging_data();
    const std::string what = "find_unused=" + std::to_string(c.find_unused) + " static=" + std::to_string(c.static_graph);
    EXPECT_EQ(d.initial_bucket_indices.size(), c.initial) << what;
    EXPECT_EQ(d.initial_bucket_sizes.size(), c.initial) << what;
    EXPECT_EQ(d.bucket_indices.size(), c.after) << what;
    EXPECT_EQ(d.has_rebuilt_buckets, c.rebuilt) << what;
    if (c.initial == 1) {
      EXPECT_EQ(d.initial_bucket_indices[0].size(), 6u) << what;
    }
    // Rebuilt in gradient-ready order: the last layer's bias first, the first layer's weight last.
    EXPECT_EQ(d.bucket_indices.front(), std::vector<size_t>{5}) << what;
    EXPECT_EQ(d.bucket_indices.back(), std::vector<size_t>{0}) << what;
  }
}

// Measured with torch 1.13 on ResNet-20: one bucket without find_unused_parameters and two
// with it; after the rebuild ([1 MiB, 25 MiB] in gradient order) two as well.
TEST_F(DdpFirstIterationBuckets, ResNet20MatchesPyTorch) {
  for (bool find_unused : {false, true}) {
    Generator g(1);
    auto model = std::make_shared<nn::ResNet>(nn::ResNetOptions{}, &g);
    DDPOptions o;
    o.find_unused_parameters = find_unused;
    auto ddp = std::make_shared<DistributedDataParallel>(model, o);
    EXPECT_EQ(ddp->get_ddp_logging_data().num_buckets, find_unused ? 2 : 1);
    Generator data(2);
    sum(ddp->forward(randn({2, 1, 28, 28}, &data))).backward();
    (void)ddp->forward(randn({2, 1, 28, 28}, &data));
    DDPLoggingData d = ddp->get_ddp_logging_data();
    EXPECT_EQ(d.initial_bucket_sizes.size(), find_unused ? 2u : 1u);
    EXPECT_EQ(d.num_buckets, 2);
    EXPECT_EQ(d.has_rebuilt_buckets, !find_unused);
  }
}

}  // namespace
}  // namespace ember::distributed::testing
