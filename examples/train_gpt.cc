// Trains a character-level GPT (nanoGPT's model) alone or under mpirun, as nanoGPT's train.py does:
//   bazel-bin/examples/train_gpt --max_iters=2000 --sample=300
//   mpirun -np 2 bazel-bin/examples/train_gpt --max_iters=2000 --sample=300
// Under mpirun the model is wrapped in DistributedDataParallel: each step the ranks draw one global
// batch of random windows together (data::WindowSampler, --batch windows each), DDP averages the
// gradients (the tied embedding and output weight is one parameter, reduced once), and every rank
// clips the averaged gradients' global norm and steps AdamW with nanoGPT's two weight-decay groups.
// The corpus is the King James Bible (Debian's bible-kjv) unless --corpus names a text file. Rank 0
// prints progress and the evaluations, checkpoints resume exactly (--checkpoint, --resume), and the
// last line is
//   RESULT val_loss=... train_loss=... tokens_per_s=... ms_per_step=... steps=... tokens_per_step=...
// (tokens per second count all ranks). --sample=N prints N generated characters before it.
#include <cstdio>
#include <memory>

#include <ember/distributed.h>

#include "examples/common/flags.h"
#include "examples/common/gpt_training.h"
#include "examples/common/training.h"

namespace ember::examples {
namespace {

constexpr const char* kProgram = "train_gpt";

void print_banner(const GptTrainConfig& cfg, const GptRun& run, const GptRanks& ranks, int64_t buckets) {
  std::fprintf(stderr,
               "train_gpt: %s (%lld characters, vocabulary %lld), %d rank(s), GPT %lld layers x %lld heads x %lld "
               "wide, block %lld, %lld parameters, batch %lld per rank, %lld steps, %lld DDP buckets, CPU kernels %s\n",
               run.corpus.source().c_str(), (long long)run.corpus.text().size(),
               (long long)run.corpus.vocab().size(), ranks.world, (long long)cfg.n_layer, (long long)cfg.n_head,
               (long long)cfg.n_embd, (long long)cfg.block_size, (long long)run.model->num_parameters(),
               (long long)cfg.batch, (long long)cfg.max_iters, (long long)buckets, cpu_capability());
}

// One training step's row of --metrics (its throughput column is tokens_per_s, all ranks).
StepMetrics step_metrics(int64_t global_step, double loss, double lr, double tokens_per_step, double step_s) {
  StepMetrics m;
  m.step = global_step;
  m.epoch = 1;  // windows are drawn at random: one endless epoch
  m.loss = loss;
  m.lr = lr;
  m.img_per_s = tokens_per_step / step_s;
  m.ms_per_step = 1000.0 * step_s;
  return m;
}

int train(int argc, char** argv, int* rank, bool* flags_parsed) {
  // ---- flags, and DDP when mpirun started more than one process (train.py: ddp = RANK is set)
  bool help = false;
  int64_t timeout_s = 60;
  std::string backend;
  const auto ddp_flags = [&](flags::CommandLine& cli) {
    flags::add_backend(cli, &backend);
    cli.add_option("--timeout", timeout_s, "seconds a collective may wait for a peer before the job fails, naming it")
        ->check(flags::positive_integer());
  };
  const GptTrainConfig cfg = parse_gpt_flags(argc, argv, kProgram, &help, ddp_flags, *rank == 0);
  if (help) return 0;
  *flags_parsed = true;
  const bool ddp = flags::launcher_world_size() > 1;
  GptRanks ranks;
  if (ddp) {
    distributed::ProcessGroup::Options pg_options;
    pg_options.timeout = std::chrono::seconds(timeout_s);
    ranks.group = distributed::init_process_group(flags::default_backend(backend, "cpu"), pg_options);
    ranks.rank = *rank = ranks.group->rank();
    ranks.world = ranks.group->size();
  }
  const bool master = ranks.rank == 0;
  std::unique_ptr<MetricsWriter> metrics;
  if (master && !cfg.metrics.empty()) {
    metrics = std::make_unique<MetricsWriter>(cfg.metrics, !cfg.resume.empty(), "tokens_per_s");
  }

  // ---- data, model, optimizer, schedule; the DDP wrapper; where a resumed run starts
  GptRun run(cfg);
  nn::GPT& model = *run.model;
  std::shared_ptr<distributed::DistributedDataParallel> ddp_model;
  if (ddp) ddp_model = std::make_shared<distributed::DistributedDataParallel>(run.model);
  nn::Module& forward = ddp ? static_cast<nn::Module&>(*ddp_model) : model;
  const TrainState state = run.state();
  const TrainShape shape{cfg.seed, ranks.world, cfg.batch, cfg.max_iters};
  const TrainPosition start = resume_from(run.resume, state, shape, ranks.rank, master);
  CheckpointWriter writer({cfg.checkpoint, ranks.rank,
                           [&ranks] { if (ranks.group) ranks.group->barrier()->wait(); }, true});
  if (master) print_banner(cfg, run, ranks, ddp ? ddp_model->get_ddp_logging_data().num_buckets : 0);

  // ---- the training loop
  data::WindowSampler sampler(run.corpus.train(), {cfg.block_size, cfg.batch, ranks.world, ranks.rank, cfg.seed});
  const std::vector<Tensor> params = model.parameters();
  const int64_t tokens_per_step = cfg.block_size * cfg.batch * ranks.world;
  Progress progress(1, 1, cfg.max_iters, "tok/s");
  GptResult result;
  TrainPosition pos = start;
  double smoothed = 0;
  forward.train();
  while (pos.step < cfg.max_iters) {
    if (pos.step % cfg.eval_interval == 0 && pos.step > start.step) {
      const double train_loss = estimate_loss(cfg, run.corpus.train(), model, ranks, 2 * pos.step + 1);
      const double val_loss = estimate_loss(cfg, run.corpus.val(), model, ranks, 2 * pos.step + 2);
      if (master) std::fprintf(stderr, "\nstep %lld: train loss %.4f, val loss %.4f\n", (long long)pos.step, train_loss, val_loss);
    }
    const auto t0 = Clock::now();
    const data::WindowBatch batch = sampler.batch(pos.step);
    const Tensor loss = model.loss(forward.forward(batch.x), batch.y);
    run.optimizer.zero_grad();
    writer.wait_for_write();  // the last checkpoint is on disk before any rank completes this step
    loss.backward();          // under DDP: the gradients' allreduce, overlapped with backward
    if (cfg.grad_clip > 0) nn::utils::clip_grad_norm_(params, cfg.grad_clip);
    run.optimizer.step();
    const double lr = run.schedule.get_last_lr()[0];
    run.schedule.step();
    const double loss_value = loss.item<double>();
    const double step_s = seconds_since(t0);
    result.seconds += step_s;
    ++result.steps;
    ++pos.step;
    ++pos.global_step;
    smoothed = result.steps == 1 ? loss_value : 0.98 * smoothed + 0.02 * loss_value;
    if (metrics) metrics->write(step_metrics(pos.global_step, loss_value, lr, tokens_per_step, step_s));
    if (master) progress.update(pos.step, smoothed, result.steps * tokens_per_step / result.seconds);
    if (cfg.checkpoint_every > 0 && pos.step % cfg.checkpoint_every == 0 && pos.step < cfg.max_iters) {
      writer.save(state, pos, shape);
    }
    maybe_kill_at_step(pos.global_step, ranks.rank);
  }
  if (master) progress.finish();

  // ---- the final evaluation, checkpoint, sample and RESULT line
  result.tokens = result.steps * tokens_per_step;
  result.train_loss = estimate_loss(cfg, run.corpus.train(), model, ranks, 2 * pos.step + 1);
  result.val_loss = estimate_loss(cfg, run.corpus.val(), model, ranks, 2 * pos.step + 2);
  if (!cfg.checkpoint.empty()) writer.save(state, pos, shape);
  writer.wait_for_write();
  if (master) {
    if (cfg.sample > 0) {
      std::printf("--- sample ---\n%s\n--- end of sample ---\n",
                  sample_text(cfg, model, run.corpus.vocab(), cfg.sample).c_str());
    }
    print_gpt_result(result, tokens_per_step);
  }
  ddp_model.reset();
  if (ddp) distributed::destroy_process_group();
  return 0;
}

}  // namespace

int example_main(int argc, char** argv) {
  int rank = flags::launcher_rank();
  bool flags_parsed = false;
  try {
    return train(argc, argv, &rank, &flags_parsed);
  } catch (const std::exception& e) {
    if (flags::launcher_world_size() > 1) {
      if (!flags_parsed && rank != 0) return 1;  // rank 0 reports a bad command line
      flags::report_rank_error(rank, kProgram, e.what());
    } else {
      std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    }
    return 1;
  }
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
