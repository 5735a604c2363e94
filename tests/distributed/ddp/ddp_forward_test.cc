// What DDP's constructor and forward do around the wrapped module, checked against PyTorch's
// documented behaviour: which parameters and buffers are
// broadcast, forwards without a backward, several outputs of which the loss uses only some, and
// when buffers are broadcast in forward. Equivalence checks compare with one process training on
// the whole batch, within 1e-5 relative.
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

constexpr double kRtol = 1e-5;

class DdpForward : public MpiTest {
 protected:
  // Rank 0's copy of `t` (a broadcast of a clone).
  Tensor rank0_value(const Tensor& t) {
    Tensor c = t.detach().clone();
    std::vector<Tensor> v{c};
    pg_->broadcast(v)->wait();
    return c;
  }
  bool same_as_rank0(const Tensor& t) { return equal(t.detach(), rank0_value(t)); }
};

// ---- 1. construction broadcasts every parameter and buffer except the ignored ones ------------

// A frozen feature layer (requires_grad=false), a trainable head, a buffer, and a buffer and a
// parameter DDP is told to ignore.
struct Frozen : nn::Module {
  std::shared_ptr<nn::Linear> features, head;
  explicit Frozen(uint64_t seed) : nn::Module("Frozen") {
    Generator g(seed);
    features = register_module("features", std::make_shared<nn::Linear>(6, 8, true, &g));
    head = register_module("head", std::make_shared<nn::Linear>(8, 4, true, &g));
    for (auto& [name, p] : features->named_parameters()) p.set_requires_grad(false);
    register_buffer("shared_stat", full({3}, static_cast<double>(seed % 97)));
    register_buffer("local_stat", full({2}, static_cast<double>(seed % 89)));
  }
  Tensor forward(const Tensor& x) override { return head->forward(relu(features->forward(x))); }
};

TEST_F(DdpForward, FrozenParametersAndBuffersAreBroadcastIgnoredOnesNever) {
  auto model = std::make_shared<Frozen>(1234 + 17 * rank_);
  const Tensor own_local_stat = model->named_buffers()[1].second.clone();
  const Tensor own_head_bias = model->head->named_parameters()[1].second.clone();
  DDPOptions o;
  o.parameters_to_ignore = {"local_stat", "head.bias"};
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  for (auto& [name, p] : model->named_parameters()) {
    if (name == "head.bias") continue;
    EXPECT_TRUE(same_as_rank0(p)) << name << " (frozen or not) must start from rank 0's value";
  }
  EXPECT_TRUE(same_as_rank0(model->named_buffers()[0].second)) << "shared_stat";
  EXPECT_TRUE(equal(model->named_buffers()[1].second, own_local_stat)) << "ignored buffer overwritten";
  EXPECT_TRUE(equal(model->head->named_parameters()[1].second, own_head_bias)) << "ignored parameter overwritten";
  EXPECT_EQ(ddp->parameter_names(), (std::vector<std::string>{"head.weight"}));
  // Forwards broadcast buffers too, never the ignored one.
  for (int step = 0; step < 2; ++step) {
    sum(ddp->forward(ones({2, 6}))).backward();
    EXPECT_TRUE(equal(model->named_buffers()[1].second, own_local_stat)) << "ignored buffer overwritten in forward";
  }
}

TEST_F(DdpForward, FrozenFeatureLayerTrainsLikeOneProcess) {
  Scenario sc;
  sc.make_model = [](uint64_t seed) { return std::make_shared<Frozen>(seed); };
  sc.make_batch = random_batches({6}, 4);
  auto ddp = train_ddp(sc, rank_, world_);  // ranks start from different weights on purpose
  EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), kRtol));
}

// ---- 2. a forward without a backward is legal ------------------------------------------------

// Each step: a validation forward with grad enabled and no backward; at step 2 also a "NaN loss"
// forward whose step is skipped; then the real step. Equal to training on the real steps alone.
TEST_F(DdpForward, ForwardWithoutBackwardThenTrainingContinues) {
  const auto batches = random_batches({6}, 4);
  const int64_t per_rank = 4;
  for (bool find_unused : {false, true}) {
    auto ddp_model = mlp(rank_ == 0 ? 1234 : 99 + rank_);
    DDPOptions o;
    o.find_unused_parameters = find_unused;
    auto ddp = std::make_shared<DistributedDataParallel>(ddp_model, o);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    auto ref = mlp(1234);
    optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < 4; ++step) {
      auto batch = batches(step, world_ * per_rank);
      auto shard = rows(batch, rank_ * per_rank, per_rank);
      Tensor validation = ddp->forward(shard.first);  // grad enabled, never backpropagated
      EXPECT_TRUE(validation.requires_grad());
      if (step == 2) (void)ddp->forward(shard.first);  // the skipped step
      opt.zero_grad();
      ASSERT_NO_THROW(nn::functional::cross_entropy(ddp->forward(shard.first), shard.second).backward())
          << "find_unused_parameters=" << find_unused << " step " << step;
      opt.step();
      reference_step(ref_opt, world_, [&](int r) {
        auto s = rows(batch, r * per_rank, per_rank);
        return nn::functional::cross_entropy(ref->forward(s.first), s.second);
      });
    }
    EXPECT_TRUE(parameters_match(ddp_model->parameters(), ref->parameters(), kRtol))
        << "find_unused_parameters=" << find_unused;
  }
}

TEST_F(DdpForward, TwoForwardsThenOneBackward) {
  const auto batches = random_batches({6}, 4);
  const int64_t per_rank = 4;
  auto ddp_model = mlp(1234 + rank_);
  auto ddp = std::make_shared<DistributedDataParallel>(ddp_model);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
  auto ref = mlp(1234);
  optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    auto first = batches(2 * step, world_ * per_rank), second = batches(2 * step + 1, world_ * per_rank);
    auto a = rows(first, rank_ * per_rank, per_rank), b = rows(second, rank_ * per_rank, per_rank);
    opt.zero_grad();
    Tensor out_a = ddp->forward(a.first);
    Tensor out_b = ddp->forward(b.first);
    add(nn::functional::cross_entropy(out_a, a.second), nn::functional::cross_entropy(out_b, b.second)).backward();
    opt.step();
    reference_step(ref_opt, world_, [&](int r) {
      auto ra = rows(first, r * per_rank, per_rank), rb = rows(second, r * per_rank, per_rank);
      return add(nn::functional::cross_entropy(ref->forward(ra.first), ra.second),
                 nn::functional::cross_entropy(ref->forward(rb.first), rb.second));
    });
  }
  EXPECT_TRUE(parameters_match(ddp_model->parameters(), ref->parameters(), kRtol));
}

// ---- 5. several outputs, not all of which reach the loss -------------------------------------

struct TwoHeads : nn::Module, ShardAware {
  std::shared_ptr<nn::Linear> trunk, head_a, head_b;
  explicit TwoHeads(uint64_t seed) : nn::Module("TwoHeads") {
    Generator g(seed);
    trunk = register_module("trunk", std::make_shared<nn::Linear>(6, 8, true, &g));
    head_a = register_module("head_a", std::make_shared<nn::Linear>(8, 4, true, &g));
    head_b = register_module("head_b", std::make_shared<nn::Linear>(8, 4, true, &g));
  }
  std::vector<Tensor> forward_many(const std::vector<Tensor>& in) override {
    Tensor h = relu(trunk->forward(in.at(0)));
    return {head_a->forward(h), head_b->forward(h)};
  }
  // The same outputs as a struct of named tensors, for DistributedDataParallel::call.
  struct Heads {
    Tensor logits, aux;
    template <class F>
    void for_each_tensor(F f) {
      f(logits);
      f(aux);
    }
  };
  Heads heads(const Tensor& x) {
    auto out = forward_many({x});
    return {out[0], out[1]};
  }
};

// Loss on shard s: head_a's cross entropy, plus head_b's on shards < use_b_on.
Tensor two_heads_loss(const Tensor& a, const Tensor& b, const Tensor& target, int shard, int use_b_on) {
  Tensor l = nn::functional::cross_entropy(a, target);
  return shard < use_b_on ? add(l, nn::functional::cross_entropy(b, target)) : l;
}

class DdpOutputs : public DdpForward, public ::testing::WithParamInterface<int> {};

// GetParam(): head_b's output reaches the loss on shards < GetParam() (0: on no rank, 1: on rank 0
// only). Without the output sink head_b's hooks never fire and the next forward fails with
// "Expected to have finished reduction".
TEST_P(DdpOutputs, UnusedOutputWithFindUnusedParameters) {
  const int use_b_on = GetParam();
  const auto batches = random_batches({6}, 4);
  const int64_t per_rank = 4;
  auto model = std::make_shared<TwoHeads>(1234 + 7 * rank_);
  DDPOptions o;
  o.find_unused_parameters = true;
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto ref = std::make_shared<TwoHeads>(1234);
  optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    auto batch = batches(step, world_ * per_rank);
    auto shard = rows(batch, rank_ * per_rank, per_rank);
    opt.zero_grad();
    if (step % 2 == 0) {
      std::vector<Tensor> out = ddp->forward_many({shard.first});
      ASSERT_NO_THROW(two_heads_loss(out[0], out[1], shard.second, rank_, use_b_on).backward()) << step;
    } else {
      TwoHeads::Heads out = ddp->call([&] { return model->heads(shard.first); });
      ASSERT_NO_THROW(two_heads_loss(out.logits, out.aux, shard.second, rank_, use_b_on).backward()) << step;
    }
    opt.step();
    reference_step(ref_opt, world_, [&](int r) {
      auto s = rows(batch, r * per_rank, per_rank);
      auto out = ref->forward_many({s.first});
      return two_heads_loss(out[0], out[1], s.second, r, use_b_on);
    });
  }
  EXPECT_TRUE(parameters_match(model->parameters(), ref->parameters(), kRtol));
  // Unused on every rank: .grad untouched (undefined after zero_grad), as PyTorch.
  EXPECT_EQ(model->head_b->weight().grad().defined(), use_b_on > 0);
}

INSTANTIATE_TEST_SUITE_P(UseHeadB, DdpOutputs, ::testing::Values(0, 1));

// Without find_unused_parameters an output outside the loss is the user's error, reported (as in
// PyTorch) at the next forward with the parameters that got no gradient.
TEST_F(DdpForward, UnusedOutputWithoutFindUnusedFailsTheNextForward) {
  auto model = std::make_shared<TwoHeads>(5);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  std::vector<Tensor> out = ddp->forward_many({ones({2, 6})});
  sum(out[0]).backward();
  EXPECT_THAT(error_of([&] { (void)ddp->forward_many({ones({2, 6})}); }),
              HasSubstr("Parameters which did not receive grad for rank " + std::to_string(rank_) +
                        ": head_b.weight, head_b.bias"));
}

// ---- 6. buffers are broadcast in forward only when PyTorch would ------------------------------

struct WithStat : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  explicit WithStat(uint64_t seed) : nn::Module("WithStat") {
    Generator g(seed);
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2, true, &g));
    register_buffer("stat", zeros({2}));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
};

// Before each forward every rank writes its own value into the buffer; afterwards it holds rank
// 0's value exactly when the previous forward ran with grad enabled and synchronising (PyTorch's
// require_forward_param_sync, initially true).
TEST_F(DdpForward, BuffersBroadcastOnlyAfterASynchronisingForward) {
  auto model = std::make_shared<WithStat>(3);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  Tensor stat = model->named_buffers()[0].second;
  enum Kind { kTrain, kNoGrad, kNoSync };
  struct Step {
    Kind kind;
    bool expect_broadcast;
  };
  const std::vector<Step> steps{{kTrain, true},   {kNoGrad, true}, {kNoGrad, false},
                                {kTrain, false},  {kNoSync, true}, {kTrain, false},
                                {kTrain, true},   {kNoGrad, true}};
  for (size_t i = 0; i < steps.size(); ++i) {
    {
      NoGradGuard ng;
      fill_(stat, 10.0 + rank_);
    }
    if (steps[i].kind == kNoGrad) {
      NoGradGuard ng;
      (void)ddp->forward(ones({1, 3}));
    } else if (steps[i].kind == kNoSync) {
      auto guard = ddp->no_sync();
      sum(ddp->forward(ones({1, 3}))).backward();
    } else {
      sum(ddp->forward(ones({1, 3}))).backward();
    }
    const double want = steps[i].expect_broadcast ? 10.0 : 10.0 + rank_;
    EXPECT_TRUE(equal(stat, full({2}, want))) << "forward " << i << ": buffer is "
                                              << stat.to(kFloat64).data_ptr<double>()[0] << ", expected " << want;
  }
}

}  // namespace
}  // namespace ember::distributed::testing
