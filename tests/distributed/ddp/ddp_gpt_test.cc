// nanoGPT's training step under DDP: a tiny nn::GPT in float64, AdamW with the
// two weight-decay groups, clip_grad_norm_ after backward and the warm-up cosine lr, each rank on
// its rows of a global batch, ends bit-for-bit close to one process on the whole batch after a
// few steps; the clipped norm is the global one on every rank, and the head stays tied to wte.
#include "nn/models/gpt.h"
#include "optim/lr_scheduler.h"
#include "optim/param_groups.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

// float64 through and through: DDP's average and the reference's sum over shards differ only in
// rounding, which Adam's normalisation carries through 4 steps at about 1e-14 (printed).
constexpr double kRtol = 1e-10;
constexpr double kAtol = 1e-12;
constexpr int kSteps = 4;
constexpr int64_t kPerRank = 2;
constexpr double kMaxNorm = 0.5;  // below the unclipped norms (checked), so clipping bites

nn::GPTConfig tiny_config(bool bias) {
  nn::GPTConfig c;
  c.block_size = 8;
  c.vocab_size = 13;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.bias = bias;
  return c;
}

std::shared_ptr<nn::GPT> make_gpt(bool bias, uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_shared<nn::GPT>(tiny_config(bias), &gen);
  model->to(kFloat64);
  return model;
}

// Step `step`'s global batch of token windows [rows, 8] and their targets (the next tokens).
std::pair<Tensor, Tensor> global_batch(int step, int64_t rows) {
  Generator g(5300 + step);
  Tensor tokens = randint(0, 13, {rows, 9}, &g, kInt64);
  return {contiguous(narrow(tokens, 1, 0, 8)), contiguous(narrow(tokens, 1, 1, 8))};
}

// nanoGPT's optimizer: AdamW over the decay / no-decay groups, betas (0.9, 0.95), with its lr
// schedule.
struct Training {
  explicit Training(const nn::GPT& model)
      : opt(optim::configure_optimizer_groups(model, 0.1, optim::AdamOptions(1e-2).betas({0.9, 0.95})),
            optim::AdamWOptions(1e-2)),
        lr(opt, /*warmup_iters=*/2, /*decay_iters=*/kSteps) {}
  optim::AdamW opt;
  optim::WarmupCosineLR lr;
};

struct Result {
  std::vector<Tensor> params;
  std::vector<double> norms;  // the gradient norm before clipping, per step
};

Result reference(bool bias, int world) {
  auto model = make_gpt(bias, 1234);
  Training t(*model);
  Result r;
  for (int step = 0; step < kSteps; ++step) {
    auto batch = global_batch(step, world * kPerRank);
    t.opt.zero_grad();
    for (int shard = 0; shard < world; ++shard) {
      auto [x, y] = rows(batch, shard * kPerRank, kPerRank);
      div(model->loss(model->forward(x), y), static_cast<double>(world)).backward();
    }
    r.norms.push_back(nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm).item<double>());
    t.opt.step();
    t.lr.step();
  }
  r.params = model->parameters();
  return r;
}

class DdpGpt : public MpiTest, public ::testing::WithParamInterface<std::tuple<bool, bool>> {
 protected:
  // Ranks start from different weights: DDP's constructor broadcasts rank 0's.
  std::pair<Result, std::shared_ptr<DistributedDataParallel>> train(const DDPOptions& options) {
    auto model = make_gpt(std::get<0>(GetParam()), rank_ == 0 ? 1234 : 1234 + 17 * rank_);
    auto ddp = std::make_shared<DistributedDataParallel>(model, options);
    Training t(*model);
    Result r;
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = rows(global_batch(step, world_ * kPerRank), rank_ * kPerRank, kPerRank);
      t.opt.zero_grad();
      model->loss(ddp->forward(x), y).backward();
      r.norms.push_back(nn::utils::clip_grad_norm_(ddp->parameters(), kMaxNorm).item<double>());
      t.opt.step();
      t.lr.step();
    }
    r.params = model->parameters();
    return {r, ddp};
  }
};

double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, max(abs(sub(a[i], b[i]))).item<double>());
  return worst;
}

TEST_P(DdpGpt, EqualsOneProcessOnTheGlobalBatch) {
  DDPOptions options;
  if (std::get<1>(GetParam())) {  // one bucket per parameter, gradients as bucket views
    options.bucket_cap_mb = 1e-6;
    options.first_bucket_mb = 1e-6;
    options.gradient_as_bucket_view = true;
  }
  auto [got, ddp] = train(options);
  const Result want = reference(std::get<0>(GetParam()), world_);
  EXPECT_TRUE(parameters_match(got.params, want.params, kRtol, kAtol));
  EXPECT_TRUE(ranks_agree(*pg_, got.params));
  // clip_grad_norm_ saw the averaged (global) gradients: every rank's norm is the reference's.
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(got.norms[step], want.norms[step], 1e-12 * want.norms[step]) << "step " << step;
    EXPECT_GT(want.norms[step], kMaxNorm) << "step " << step << " was not clipped";
  }
  if (rank_ == 0) {
    std::printf("[world %d, bias %d, tiny buckets %d] max |ddp - one process| over all parameters "
                "after %d steps: %.3g; norms %.4f %.4f %.4f %.4f\n",
                world_, std::get<0>(GetParam()), std::get<1>(GetParam()), kSteps,
                max_abs_diff(got.params, want.params), want.norms[0], want.norms[1], want.norms[2],
                want.norms[3]);
  }
  // The head is still the token embedding, in the module DDP wraps.
  auto& gpt = dynamic_cast<nn::GPT&>(*ddp->module());
  EXPECT_EQ(gpt.lm_head_weight().unsafe_impl(), gpt.wte_weight().unsafe_impl());
  EXPECT_TRUE(equal(nn::find_in(gpt.state_dict(), "lm_head.weight"), gpt.wte_weight()));
  // DDP reduces the tied weight once: it has as many parameters as the distinct tensors.
  EXPECT_EQ(ddp->parameters().size(), gpt.named_parameters().size());
}

INSTANTIATE_TEST_SUITE_P(BiasAndBuckets, DdpGpt, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
                           return std::string(std::get<0>(info.param) ? "Bias" : "NoBias") +
                                  (std::get<1>(info.param) ? "OneBucketPerParameter" : "DefaultBuckets");
                         });

}  // namespace
}  // namespace ember::distributed::testing
