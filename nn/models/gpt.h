// GPT: nanoGPT's decoder-only transformer (karpathy/nanoGPT model.py) with its module structure
// and parameter names, so a state dict saved here loads into nanoGPT and one saved there loads here:
//   transformer.wte.weight, transformer.wpe.weight,
//   transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias},
//   transformer.ln_f.{weight, bias}, lm_head.weight (tied to transformer.wte.weight).
// Attention is nanoGPT's flash path (scaled_dot_product_attention, causal), so there is no
// attn.bias mask buffer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/layers/container.h"
#include "nn/layers/linear.h"
#include "nn/layers/simple.h"
#include "nn/module.h"
#include "tensor/generator.h"

namespace ember::nn {

// nanoGPT's GPTConfig (defaults are GPT-2 small with the vocabulary padded to 50304).
struct GPTConfig {
  int64_t block_size = 1024;
  int64_t vocab_size = 50304;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;
  bool bias = true;  // biases in the Linears and LayerNorms (false: a bit better and faster)
};

// nanoGPT's LayerNorm: torch.nn.LayerNorm's weight with an optional bias (PyTorch's own LayerNorm
// gained bias=False only in 2.1). eps 1e-5 over the last dim.
class GPTLayerNorm : public Module {
 public:
  GPTLayerNorm(int64_t ndim, bool bias);
  Tensor forward(const Tensor& input) override;

 private:
  bool has_bias_;
};

// Multi-head causal self-attention: c_attn projects to q, k, v at once, heads of n_embd / n_head,
// then c_proj and residual dropout.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator* gen);
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]

 private:
  int64_t n_head_, n_embd_;
  double dropout_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
  std::shared_ptr<Dropout> resid_dropout_;
};

// c_fc (4x wider), exact GELU, c_proj, dropout.
class MLP : public Module {
 public:
  MLP(const GPTConfig& config, Generator* gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Linear> c_fc_, c_proj_;
  std::shared_ptr<GELU> gelu_;
  std::shared_ptr<Dropout> dropout_;
};

// Pre-norm residual block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public Module {
 public:
  Block(const GPTConfig& config, Generator* gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<GPTLayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<MLP> mlp_;
};

// The model. forward: idx int64 [B, T] (T <= block_size) -> logits [B, T, vocab_size] (nanoGPT
// returns only the last position's logits when it has no targets; this returns all of them).
// The constructor throws on a config nanoGPT would reject (n_embd % n_head != 0, sizes < 1,
// dropout outside [0, 1)). Weights are drawn from `gen` (the default generator when null) with
// nanoGPT's initialisation; dropout draws from the default generator.
class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config, Generator* gen = nullptr);
  Tensor forward(const Tensor& idx) override;
  // nanoGPT's loss: cross entropy of logits [B, T, V] against targets int64 [B, T] over the
  // flattened B * T positions, mean, targets of -1 ignored.
  Tensor loss(const Tensor& logits, const Tensor& targets) const;

  // nanoGPT's configure_optimizers split: every parameter of 2 or more dims decays (the matmul
  // weights and the embeddings, the tied head included once); biases and LayerNorm weights do not.
  struct WeightDecaySplit {
    std::vector<std::pair<std::string, Tensor>> decay, no_decay;
  };
  // (optim::configure_optimizer_groups makes the optimizer's two groups of it: optim/param_groups.h.)
  WeightDecaySplit weight_decay_split() const;

  // Appends max_new_tokens tokens to idx [B, T], each sampled from softmax(logits / temperature)
  // of the last position (the context cropped to block_size), kept to the top_k most likely when
  // top_k > 0. Runs without gradients, in whatever mode the model is in (call eval() first, as
  // nanoGPT's sample.py does). Throws unless temperature > 0.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0,
                  int64_t top_k = 0, Generator* gen = nullptr);

  // nanoGPT's get_num_params: each distinct parameter once (the tied head is wte); with
  // non_embedding, the position embeddings are left out (the token ones count, as the head).
  int64_t num_parameters(bool non_embedding = true) const;

  const GPTConfig& config() const { return config_; }
  Tensor& wte_weight() { return wte_->weight(); }
  Tensor& lm_head_weight() { return lm_head_->weight(); }

 private:
  void init_weights(Generator* gen);

  GPTConfig config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<ModuleList> h_;
  std::shared_ptr<GPTLayerNorm> ln_f_;
  std::shared_ptr<Linear> lm_head_;
};

}  // namespace ember::nn
