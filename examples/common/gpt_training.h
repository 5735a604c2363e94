// What the GPT trainer (examples/train_gpt.cc, whose loop is nanoGPT's train.py) builds on: flags,
// the corpus, the model with nanoGPT's optimizer groups and schedule, the validation estimate,
// samples, and the final machine-readable RESULT line
//   RESULT val_loss=... train_loss=... tokens_per_s=... ms_per_step=... steps=...
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ember/distributed.h>
#include <ember/nn.h>
#include <ember/optim.h>

#include "data/text_corpus.h"
#include "examples/common/flags.h"
#include "examples/common/metrics_writer.h"
#include "examples/common/train_checkpoint.h"
#include "nn/models/gpt.h"

namespace ember::examples {

struct GptTrainConfig {
  std::string corpus;          // a text file; empty: the King James Bible (Debian's bible-kjv)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;
  double dropout = 0.0;
  int64_t batch = 12;          // windows per process and step
  int64_t max_iters = 2000;
  double lr = 1e-3;            // peak, after warmup_iters; cosine decay to lr * min_lr_factor
  double min_lr_factor = 0.1;
  int64_t warmup_iters = 100;
  int64_t lr_decay_iters = -1;  // -1: max_iters
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double grad_clip = 1.0;      // 0: no clipping
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;     // batches per split and evaluation (all ranks together)
  int64_t threads = 1;
  uint64_t seed = 1337;
  std::string checkpoint;      // written every checkpoint_every steps and at the end (rank 0)
  int64_t checkpoint_every = 0;
  std::string resume;
  std::string metrics;         // per-step metrics, .csv or .jsonl (rank 0)
  int64_t sample = 0;          // characters generated at the end
  double temperature = 0.8;
  int64_t top_k = 0;           // 0: sample from the whole vocabulary
};

// Parses the GPT trainers' flags; --help prints them (when print_help) and sets *help. Throws one
// line naming the flag and value for a bad one, and for combinations that cannot work
// (n_embd not a multiple of n_head, --checkpoint_every without --checkpoint).
GptTrainConfig parse_gpt_flags(int argc, char** argv, const std::string& program, bool* help,
                               const std::function<void(flags::CommandLine&)>& extra = {},
                               bool print_help = true);

// --corpus, or the King James Bible.
data::TextCorpus load_corpus(const GptTrainConfig& cfg);
nn::GPTConfig gpt_config(const GptTrainConfig& cfg, int64_t vocab_size);

// nanoGPT's configure_optimizers: AdamW over two groups, weight decay for the parameters of two
// or more dims (matrices and embeddings), none for biases and LayerNorm weights
// (optim::configure_optimizer_groups), betas (beta1, beta2).
optim::AdamW make_gpt_optimizer(const GptTrainConfig& cfg, const nn::GPT& model);

// What the trainer builds from its flags, in this order: the threads and the default
// generator's seed (--threads, --seed), the --resume checkpoint read and checked (a bad file
// fails before any work), the corpus, the model, nanoGPT's AdamW and its schedule; and the state
// a checkpoint holds of them.
struct GptRun {
  explicit GptRun(const GptTrainConfig& cfg);
  std::optional<LoadedCheckpoint> resume;
  data::TextCorpus corpus;
  std::shared_ptr<nn::GPT> model;
  optim::AdamW optimizer;
  optim::WarmupCosineLR schedule;
  TrainState state() { return TrainState{model.get(), &optimizer, &schedule}; }
};

// Who this process is in the job: one process alone, or one rank of a DDP job under mpirun with
// the group the evaluation's mean goes over.
struct GptRanks {
  int rank = 0;
  int world = 1;
  distributed::ProcessGroupPtr group;  // null alone
  // The mean over the ranks of one number per rank (the number itself alone).
  double mean(double v) const;
};

// Mean cross entropy (GPT::loss) of cfg.eval_iters global batches of `tokens` (windows drawn from
// the seed and the evaluation's index), split over the ranks; eval mode, no grad.
double estimate_loss(const GptTrainConfig& cfg, const Tensor& tokens, nn::GPT& model, const GptRanks& ranks,
                     uint64_t draw);

// What a run reports at its end.
struct GptResult {
  double val_loss = 0;
  double train_loss = 0;
  int64_t steps = 0;     // taken by this run (a resumed run counts from where it resumed)
  double seconds = 0;    // of training steps, evaluations excluded
  int64_t tokens = 0;    // trained on, all ranks together
};

// `n` characters sampled from the model after a newline, with cfg.temperature and cfg.top_k.
std::string sample_text(const GptTrainConfig& cfg, nn::GPT& model, const data::CharVocabulary& vocab, int64_t n);

// The closing line.
void print_gpt_result(const GptResult& result, int64_t tokens_per_step);

}  // namespace ember::examples
