#include "nn/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/functional.h"
#include "nn/init.h"
#include "tensor/all.h"

namespace ember::nn {

GPTLayerNorm::GPTLayerNorm(int64_t ndim, bool bias) : Module("LayerNorm"), has_bias_(bias) {
  register_parameter("weight", ones({ndim}));
  if (bias) register_parameter("bias", zeros({ndim}));
}

Tensor GPTLayerNorm::forward(const Tensor& input) {
  return functional::layer_norm(input, 1, param("weight"), has_bias_ ? param("bias") : Tensor(), 1e-5);
}

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c, Generator* gen)
    : Module("CausalSelfAttention"), n_head_(c.n_head), n_embd_(c.n_embd), dropout_(c.dropout) {
  c_attn_ = register_module("c_attn", std::make_shared<Linear>(c.n_embd, 3 * c.n_embd, c.bias, gen));
  c_proj_ = register_module("c_proj", std::make_shared<Linear>(c.n_embd, c.n_embd, c.bias, gen));
  // nanoGPT's flash path hands attention dropout to scaled_dot_product_attention (its
  // attn_dropout module is only used by the slow path, and holds nothing), so only this one.
  resid_dropout_ = register_module("resid_dropout", std::make_shared<Dropout>(c.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention: expected input [B, T, ",
              n_embd_, "], got ", x.describe());
  const int64_t B = x.size(0), T = x.size(1), C = n_embd_, hs = C / n_head_;
  std::vector<Tensor> qkv = split(c_attn_->forward(x), C, 2);
  // [B, T, C] -> [B, nh, T, hs]; split's pieces are strided views, so reshape, not view.
  auto heads = [&](const Tensor& t) { return transpose(reshape(t, {B, T, n_head_, hs}), 1, 2); };
  functional::AttentionOptions options;
  options.is_causal = true;
  options.dropout_p = is_training() ? dropout_ : 0.0;
  Tensor y = functional::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), options);
  y = reshape(contiguous(transpose(y, 1, 2)), {B, T, C});  // re-assemble the heads side by side
  return resid_dropout_->forward(c_proj_->forward(y));
}

MLP::MLP(const GPTConfig& c, Generator* gen) : Module("MLP") {
  c_fc_ = register_module("c_fc", std::make_shared<Linear>(c.n_embd, 4 * c.n_embd, c.bias, gen));
  gelu_ = register_module("gelu", std::make_shared<GELU>("none"));
  c_proj_ = register_module("c_proj", std::make_shared<Linear>(4 * c.n_embd, c.n_embd, c.bias, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(c.dropout));
}

Tensor MLP::forward(const Tensor& x) {
  return dropout_->forward(c_proj_->forward(gelu_->forward(c_fc_->forward(x))));
}

Block::Block(const GPTConfig& c, Generator* gen) : Module("Block") {
  ln_1_ = register_module("ln_1", std::make_shared<GPTLayerNorm>(c.n_embd, c.bias));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(c, gen));
  ln_2_ = register_module("ln_2", std::make_shared<GPTLayerNorm>(c.n_embd, c.bias));
  mlp_ = register_module("mlp", std::make_shared<MLP>(c, gen));
}

Tensor Block::forward(const Tensor& x) {
  Tensor out = add(x, attn_->forward(ln_1_->forward(x)));
  return add(out, mlp_->forward(ln_2_->forward(out)));
}

namespace {

void check_config(const GPTConfig& c) {
  EMBER_CHECK(c.block_size >= 1 && c.vocab_size >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1,
              "GPT: block_size, vocab_size, n_layer, n_head and n_embd must be at least 1, got block_size=",
              c.block_size, ", vocab_size=", c.vocab_size, ", n_layer=", c.n_layer, ", n_head=", c.n_head,
              ", n_embd=", c.n_embd);
  EMBER_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd (", c.n_embd, ") must be a multiple of n_head (",
              c.n_head, ")");
  EMBER_CHECK(c.dropout >= 0 && c.dropout < 1, "GPT: dropout must be in [0, 1), got ", c.dropout);
}

}  // namespace

GPT::GPT(const GPTConfig& c, Generator* gen) : Module("GPT"), config_(c) {
  check_config(c);
  // nn.ModuleDict(wte, wpe, drop, h, ln_f) in nanoGPT: a plain module holding the children gives
  // the same "transformer." names.
  auto transformer = register_module("transformer", std::make_shared<Module>("ModuleDict"));
  wte_ = transformer->register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd, false, gen));
  wpe_ = transformer->register_module("wpe", std::make_shared<Embedding>(c.block_size, c.n_embd, false, gen));
  drop_ = transformer->register_module("drop", std::make_shared<Dropout>(c.dropout));
  h_ = transformer->register_module("h", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) h_->push_back(std::make_shared<Block>(c, gen));
  ln_f_ = transformer->register_module("ln_f", std::make_shared<GPTLayerNorm>(c.n_embd, c.bias));
  lm_head_ = register_module("lm_head", std::make_shared<Linear>(c.n_embd, c.vocab_size, false, gen));
  // Weight tying (nanoGPT: transformer.wte.weight = lm_head.weight): one tensor under both names.
  // named_parameters lists it once, as transformer.wte.weight; state_dict keeps both names.
  lm_head_->weight() = wte_->weight();
  init_weights(gen);
}

// nanoGPT's _init_weights and the scaled c_proj init (GPT-2's residual-path scaling): every
// matrix N(0, 0.02), c_proj.weight N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1.
// Linear and Embedding weights are exactly the parameters of 2 or more dims.
void GPT::init_weights(Generator* gen) {
  NoGradGuard no_grad;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  for (const auto& [name, p] : named_parameters()) {
    const bool is_proj = name.size() >= 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0;
    if (p.dim() >= 2) {
      init::normal_(p, 0.0, is_proj ? proj_std : 0.02, gen);
    } else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      init::zeros_(p);
    }
  }
}

Tensor GPT::forward(const Tensor& idx) {
  EMBER_CHECK(idx.dim() == 2 && idx.dtype() == kInt64, "GPT: expected idx int64 [B, T], got ", idx.describe());
  const int64_t T = idx.size(1);
  EMBER_CHECK(T <= config_.block_size, "GPT: cannot forward a sequence of length ", T,
              ", the block size is only ", config_.block_size, " (idx ", idx.shape_str(), ")");
  Tensor pos = arange(static_cast<double>(T), TensorOptions(kInt64, idx.device()));
  Tensor x = drop_->forward(add(wte_->forward(idx), wpe_->forward(pos)));  // [B, T, C] + [T, C]
  for (const auto& block : *h_) x = block->forward(x);
  return lm_head_->forward(ln_f_->forward(x));
}

Tensor GPT::loss(const Tensor& logits, const Tensor& targets) const {
  EMBER_CHECK(logits.dim() == 3 && targets.dim() == 2 && logits.size(0) == targets.size(0) &&
                  logits.size(1) == targets.size(1),
              "GPT::loss: expected logits [B, T, V] and targets [B, T], got ", logits.describe(), " and ",
              targets.describe());
  const int64_t V = logits.size(2);
  return functional::cross_entropy(reshape(logits, {-1, V}), reshape(targets, {-1}), Reduction::kMean,
                                   0.0, /*ignore_index=*/-1);
}

GPT::WeightDecaySplit GPT::weight_decay_split() const {
  WeightDecaySplit split;
  for (const auto& [name, p] : named_parameters()) (p.dim() >= 2 ? split.decay : split.no_decay).emplace_back(name, p);
  return split;
}

int64_t GPT::num_parameters(bool non_embedding) const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return non_embedding ? n - wpe_->weight().numel() : n;
}

namespace {

// One token per row of logits [B, V] (CPU float64, contiguous): softmax(logits / temperature)
// restricted to the top_k largest (ties with the k-th kept, as nanoGPT's `logits < v[-1]` does),
// sampled by inverting the cumulative distribution with one uniform draw per row.
std::vector<int64_t> sample_rows(const Tensor& logits, double temperature, int64_t top_k, Generator& gen) {
  const int64_t B = logits.size(0), V = logits.size(1);
  const double* data = logits.data_ptr<double>();
  std::vector<int64_t> tokens(B);
  std::vector<double> row(V), sorted(V);
  std::lock_guard<std::mutex> lock(gen.mutex());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t v = 0; v < V; ++v) row[v] = data[b * V + v] / temperature;
    double cutoff = -std::numeric_limits<double>::infinity();
    if (top_k > 0 && top_k < V) {
      sorted = row;
      std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
      cutoff = sorted[top_k - 1];
    }
    const double top = *std::max_element(row.begin(), row.end());
    double total = 0;
    for (double& x : row) total += (x = x < cutoff ? 0.0 : std::exp(x - top));
    double u = gen.next_double() * total;
    int64_t pick = V - 1;
    while (pick > 0 && row[pick] == 0.0) --pick;  // rounding must not land on a masked token
    for (int64_t v = 0; v < V; ++v) {
      if (row[v] > 0.0 && (u -= row[v]) < 0) {
        pick = v;
        break;
      }
    }
    tokens[b] = pick;
  }
  return tokens;
}

}  // namespace

Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens, double temperature, int64_t top_k,
                     Generator* gen) {
  EMBER_CHECK(temperature > 0, "GPT::generate: temperature must be > 0, got ", temperature);
  EMBER_CHECK(idx.dim() == 2 && idx.dtype() == kInt64, "GPT::generate: expected idx int64 [B, T], got ",
              idx.describe());
  Generator& g = gen ? *gen : default_generator();
  NoGradGuard no_grad;
  Tensor out = idx;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const int64_t T = out.size(1), keep = std::min(T, config_.block_size);
    Tensor logits = forward(narrow(out, 1, T - keep, keep));
    Tensor last = contiguous(to_dtype(to_device(select(logits, 1, keep - 1), kCPU), kFloat64));
    Tensor next = from_vector(sample_rows(last, temperature, top_k, g), {out.size(0), 1});
    out = cat({out, to_device(next, out.device())}, 1);
  }
  return out;
}

}  // namespace ember::nn
