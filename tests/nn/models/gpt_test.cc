// nn::GPT against nanoGPT in PyTorch float64 (gen_gpt_cases.py wrote the files): parameter names,
// loss, logits and every gradient on a fixed batch, with and without biases; the tied head; the
// weight-decay groups; checkpoints both ways; generation; the errors of bad configs and inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "nn/checkpoint.h"
#include "nn/models/gpt.h"
#include "optim/adam.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"
#include "tensor/all.h"
#include "tests/common/error_matchers.h"

namespace ember::nn {
namespace {

constexpr const char* kCases = "tests/nn/models/gpt_cases.safetensors";
constexpr const char* kNanoGPTState = "tests/nn/models/gpt_nanogpt_state.safetensors";
// The bar; the measured errors are printed (float64 runs agree to about 1e-14).
constexpr double kRelTol = 1e-6;

GPTConfig small_config(bool bias) {
  GPTConfig c;
  c.block_size = 8;
  c.vocab_size = 11;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.bias = bias;
  return c;
}

std::shared_ptr<GPT> make_gpt(const GPTConfig& c, uint64_t seed = 1, ScalarType dtype = kFloat64) {
  Generator gen(seed);
  auto model = std::make_shared<GPT>(c, &gen);
  model->to(dtype);
  return model;
}

std::vector<std::string> names_of(const StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& kv : sd) out.push_back(kv.first);
  return out;
}

// The tensors saved under "<prefix><name>", in file order, with the prefix taken off.
StateDict with_prefix(const StateDict& sd, const std::string& prefix) {
  StateDict out;
  for (const auto& [name, t] : sd) {
    if (name.compare(0, prefix.size(), prefix) == 0) out.emplace_back(name.substr(prefix.size()), t);
  }
  return out;
}

double max_relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  const Tensor err = div(abs(sub(got, want)), add(abs(want), 1e-12));
  return max(err).item<double>();
}

// Largest |got - want| over the largest |want|: relative to the tensor's scale, so that entries
// that cancel to almost zero (a gradient summed over a batch) do not dominate.
double scaled_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  return max(abs(sub(got, want))).item<double>() / std::max(max(abs(want)).item<double>(), 1e-300);
}

class PyTorchCases : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() { cases_ = new StateDict(load(kCases)); }
  static void TearDownTestSuite() { delete cases_; }
  static std::string prefix() { return GetParam() ? "bias." : "no_bias."; }
  static Tensor get(const std::string& name) {
    Tensor t = find_in(*cases_, prefix() + name);
    if (!t.defined()) ADD_FAILURE() << "no tensor " << prefix() << name << " in " << kCases;
    return t;
  }
  // An ember GPT holding the case's PyTorch weights.
  static std::shared_ptr<GPT> model_with_case_weights() {
    auto model = make_gpt(small_config(GetParam()));
    model->load_state_dict(with_prefix(*cases_, prefix() + "param."));
    return model;
  }
  static StateDict* cases_;
};
StateDict* PyTorchCases::cases_ = nullptr;

TEST_P(PyTorchCases, StateDictNamesAreNanoGPTsInItsOrder) {
  auto model = make_gpt(small_config(GetParam()));
  EXPECT_EQ(names_of(model->state_dict()), names_of(with_prefix(*cases_, prefix() + "param.")));
  // named_parameters lists the tied weight once, as PyTorch's does.
  EXPECT_EQ(names_of(model->named_parameters()), names_of(with_prefix(*cases_, prefix() + "grad.")));
}

TEST_P(PyTorchCases, LossLogitsAndEveryGradientMatchPyTorchFloat64) {
  auto model = model_with_case_weights();
  Tensor logits = model->forward(get("idx"));
  Tensor loss = model->loss(logits, get("targets"));
  loss.backward();
  const double loss_err = max_relative_error(loss.detach(), get("loss"));
  EXPECT_LT(loss_err, kRelTol);
  EXPECT_LT(max_relative_error(logits.detach(), get("logits")), kRelTol);
  double worst = 0, worst_scaled = 0;
  std::string worst_name;
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const Tensor want = get("grad." + name);
    const double err = max_relative_error(p.grad(), want);
    EXPECT_LT(scaled_error(p.grad(), want), kRelTol) << name;
    if (err > worst) worst = err, worst_name = name;
    worst_scaled = std::max(worst_scaled, scaled_error(p.grad(), want));
  }
  std::printf("[%s] loss rel err %.3g; gradients: worst elementwise rel err %.3g (%s), worst "
              "max-abs-err / max-abs %.3g\n",
              prefix().c_str(), loss_err, worst, worst_name.c_str(), worst_scaled);
  EXPECT_LT(worst, kRelTol) << worst_name;
}

INSTANTIATE_TEST_SUITE_P(BiasAndNoBias, PyTorchCases, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Bias" : "NoBias";
                         });

TEST(GPT, HeadIsTiedToTokenEmbedding) {
  auto model = make_gpt(small_config(true));
  EXPECT_EQ(model->lm_head_weight().unsafe_impl(), model->wte_weight().unsafe_impl());
  const auto names = names_of(model->named_parameters());
  EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 0);
  const auto sd_names = names_of(model->state_dict());
  EXPECT_EQ(std::count(sd_names.begin(), sd_names.end(), "lm_head.weight"), 1);
  EXPECT_EQ(std::count(sd_names.begin(), sd_names.end(), "transformer.wte.weight"), 1);

  // One SGD step on the tied weight moves both names, by the sum of both uses' gradients.
  Tensor before = model->wte_weight().detach().clone();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.5));
  Tensor idx = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  model->loss(model->forward(idx), from_vector<int64_t>({2, 3, 4, 5, 6, 7}, {2, 3})).backward();
  opt.step();
  EXPECT_FALSE(equal(model->wte_weight(), before));
  EXPECT_TRUE(equal(model->lm_head_weight(), model->wte_weight()));
  EXPECT_TRUE(equal(find_in(model->state_dict(), "lm_head.weight"), model->wte_weight()));
  // Rows of tokens never seen as input still move: through the head.
  EXPECT_FALSE(equal(select(model->wte_weight(), 0, 10), select(before, 0, 10)));
}

TEST(GPT, WeightDecayGroupsAreNanoGPTs) {
  auto model = make_gpt(small_config(true));
  const auto split = model->weight_decay_split();
  std::set<std::string> decay;
  for (const auto& kv : split.decay) decay.insert(kv.first);
  std::set<std::string> want = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int i = 0; i < 2; ++i) {
    for (const char* w : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}) {
      want.insert("transformer.h." + std::to_string(i) + "." + w);
    }
  }
  EXPECT_EQ(decay, want);
  for (const auto& [name, p] : split.no_decay) {
    EXPECT_EQ(p.dim(), 1) << name;
    EXPECT_TRUE(name.find("bias") != std::string::npos || name.find("ln_") != std::string::npos) << name;
  }
  // nanoGPT's count: biases of 4 Linears + 2 LayerNorms (weight, bias) per block, plus ln_f.
  EXPECT_EQ(split.no_decay.size(), 2u * (4 + 4) + 2);
  EXPECT_EQ(split.decay.size() + split.no_decay.size(), model->parameters().size());

  auto groups = optim::configure_optimizer_groups(*model, 0.1, optim::AdamOptions(6e-4).betas({0.9, 0.95}));
  ASSERT_EQ(groups.size(), 2u);
  const auto& d = dynamic_cast<const optim::AdamOptions&>(groups[0].options());
  const auto& n = dynamic_cast<const optim::AdamOptions&>(groups[1].options());
  EXPECT_EQ(d.weight_decay(), 0.1);
  EXPECT_EQ(n.weight_decay(), 0.0);
  EXPECT_EQ(d.lr(), 6e-4);
  EXPECT_EQ(n.betas().second, 0.95);
  EXPECT_EQ(groups[0].params().size(), split.decay.size());
  optim::AdamW opt(std::move(groups), optim::AdamWOptions(6e-4));
  EXPECT_EQ(opt.parameters().size(), model->parameters().size());
}

TEST(GPT, InitialisationIsNanoGPTs) {
  GPTConfig c = small_config(true);
  c.n_embd = 64;
  c.n_layer = 2;
  c.vocab_size = 101;
  auto model = make_gpt(c, 7);
  auto std_of = [](const Tensor& t) { return std::sqrt(var(t).item<double>()); };
  for (const auto& [name, p] : model->named_parameters()) {
    if (p.dim() >= 2) {
      const double want = name.find("c_proj.weight") != std::string::npos ? 0.02 / std::sqrt(4.0) : 0.02;
      EXPECT_NEAR(std_of(p), want, 0.1 * want) << name;
    } else if (name.find("bias") != std::string::npos) {
      EXPECT_TRUE(equal(p, zeros_like(p))) << name;
    } else {
      EXPECT_TRUE(equal(p, ones(p.sizes(), kFloat64))) << name;
    }
  }
  // nanoGPT's get_num_params: distinct parameters, position embeddings left out by default.
  int64_t total = 0;
  for (const Tensor& p : model->parameters()) total += p.numel();
  EXPECT_EQ(model->num_parameters(false), total);
  EXPECT_EQ(model->num_parameters(), total - c.block_size * c.n_embd);
}

TEST(GPT, CheckpointRoundTripKeepsEveryTensorAndTheTie) {
  auto a = make_gpt(small_config(true), 11);
  const std::string path = ::testing::TempDir() + "/gpt_round_trip.safetensors";
  save(a->state_dict(), path);
  auto b = make_gpt(small_config(true), 12);
  const StateDict file = load(path);
  EXPECT_EQ(names_of(file), names_of(a->state_dict()));
  b->load_state_dict(file);
  for (const auto& [name, t] : a->state_dict()) EXPECT_TRUE(equal(find_in(b->state_dict(), name), t)) << name;
  EXPECT_EQ(b->lm_head_weight().unsafe_impl(), b->wte_weight().unsafe_impl());
  Tensor idx = from_vector<int64_t>({0, 3, 5, 7}, {1, 4});
  EXPECT_TRUE(equal(a->forward(idx), b->forward(idx)));
}

TEST(GPT, LoadsTheStateDictNanoGPTSaved) {
  const StateDict file = load(kNanoGPTState);
  auto model = make_gpt(small_config(true));
  EXPECT_EQ(names_of(model->state_dict()), names_of(file));
  model->load_state_dict(file);
  for (const auto& [name, t] : file) EXPECT_TRUE(equal(find_in(model->state_dict(), name), t)) << name;
  EXPECT_EQ(model->lm_head_weight().unsafe_impl(), model->wte_weight().unsafe_impl());
}

TEST(GPT, TopOneGenerationIsGreedyAndSamplingIsSeeded) {
  auto model = make_gpt(small_config(true), 3);
  model->eval();
  Tensor idx = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Generator g1(5), g2(5);
  // Longer than block_size: the context is cropped to the last 8 tokens.
  Tensor out = model->generate(idx, 9, 1.0, 1, &g1);
  ASSERT_EQ(out.sizes(), (Shape{2, 12}));
  EXPECT_TRUE(equal(narrow(out, 1, 0, 3), idx));
  for (int64_t t = 3; t < 12; ++t) {
    const int64_t start = std::max<int64_t>(0, t - 8);
    Tensor logits = model->forward(narrow(out, 1, start, t - start));
    EXPECT_TRUE(equal(select(out, 1, t), argmax(select(logits, 1, t - start - 1), 1))) << t;
  }
  Tensor a = model->generate(idx, 5, 0.8, 4, &g1);
  Generator g3(5);
  model->generate(idx, 9, 1.0, 1, &g3);  // same draws as g1 so far
  EXPECT_TRUE(equal(model->generate(idx, 5, 0.8, 4, &g3), a));
  Tensor any = model->generate(idx, 20, 1.5, 0, &g2);
  EXPECT_GE(min(any).item<int64_t>(), 0);
  EXPECT_LT(max(any).item<int64_t>(), 11);
  EXPECT_EMBER_ERROR(model->generate(idx, 1, 0.0), "temperature must be > 0");
}

TEST(GPT, BadConfigsAndInputsThrowNamingTheShapes) {
  GPTConfig c = small_config(true);
  c.n_head = 3;
  EXPECT_EMBER_ERROR(GPT{c}, "n_embd (16) must be a multiple of n_head (3)");
  c = small_config(true);
  c.n_layer = 0;
  EXPECT_EMBER_ERROR(GPT{c}, "must be at least 1", "n_layer=0");
  c = small_config(true);
  c.dropout = 1.0;
  EXPECT_EMBER_ERROR(GPT{c}, "dropout must be in [0, 1)");
  auto model = make_gpt(small_config(true));
  EXPECT_EMBER_ERROR(model->forward(zeros({2, 9}, kInt64)), "sequence of length 9",
                     "block size is only 8", "[2, 9]");
  EXPECT_EMBER_ERROR(model->forward(zeros({2, 4}, kFloat32)), "expected idx int64 [B, T]", "float32[2, 4]");
  EXPECT_EMBER_ERROR(model->loss(zeros({2, 4, 11}, kFloat64), zeros({2, 5}, kInt64)), "logits [B, T, V]",
                     "[2, 5]");
}

TEST(GPT, DropoutIsOnlyInTraining) {
  GPTConfig c = small_config(true);
  c.dropout = 0.3;
  auto model = make_gpt(c, 4);
  Tensor idx = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 8});
  model->eval();
  const Tensor a = model->forward(idx);
  EXPECT_TRUE(equal(model->forward(idx), a));
  model->train();
  EXPECT_FALSE(equal(model->forward(idx), a));
}

}  // namespace
}  // namespace ember::nn
