// Trains a character-level GPT (nanoGPT's model) with DistributedDataParallel under mpirun:
//   mpirun -np 2 bazel-bin/examples/ddp_gpt --max_iters=2000 --sample=300
// The corpus is the King James Bible (Debian's bible-kjv) unless --corpus names a text file. Each
// step the ranks draw one global batch of random windows together (data::WindowSampler), DDP
// averages the gradients (the tied embedding and output weight is one parameter, reduced once),
// every rank clips the averaged gradients' global norm and steps AdamW with nanoGPT's two
// weight-decay groups. Rank 0 prints progress and the evaluations, checkpoints resume exactly
// (--checkpoint, --resume) and the last line is
//   RESULT val_loss=... train_loss=... tokens_per_s=... ms_per_step=... steps=... tokens_per_step=...
// (tokens per second count all ranks). --sample=N prints N generated characters before it.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <ember/distributed.h>

#include "examples/common/flags.h"
#include "examples/common/gpt_training.h"
#include "examples/common/training.h"

namespace ember::examples {

int example_main(int argc, char** argv) {
  int rank = flags::launcher_rank();
  bool flags_parsed = false;
  try {
    bool help = false;
    int64_t timeout_s = 60;
    std::string backend;
    const auto ddp_flags = [&](flags::CommandLine& cli) {
      flags::add_backend(cli, &backend);
      cli.add_option("--timeout", timeout_s, "seconds a collective may wait for a peer before the job fails, naming it")
          ->check(flags::positive_integer());
    };
    examples::GptTrainConfig cfg = examples::parse_gpt_flags(argc, argv, "ddp_gpt", &help, ddp_flags, rank == 0);
    if (help) return 0;
    flags_parsed = true;
    std::unique_ptr<examples::MetricsWriter> metrics;
    if (rank == 0 && !cfg.metrics.empty()) {
      metrics = std::make_unique<examples::MetricsWriter>(cfg.metrics, !cfg.resume.empty());
    }
    distributed::ProcessGroup::Options pg_options;
    pg_options.timeout = std::chrono::seconds(timeout_s);
    auto pg = distributed::init_process_group(flags::default_backend(backend, "cpu"), pg_options);
    rank = pg->rank();
    const int world = pg->size();
    examples::GptRun run(cfg);
    const data::TextCorpus& corpus = run.corpus;
    const std::shared_ptr<nn::GPT>& model = run.model;
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(model);
    const examples::TrainState state = run.state();
    const examples::TrainShape shape{cfg.seed, world, cfg.batch, cfg.max_iters};
    examples::TrainPosition pos = examples::resume_from(run.resume, state, shape, rank, rank == 0);
    examples::CheckpointWriter writer({cfg.checkpoint, rank, [&pg] { pg->barrier()->wait(); }, true});
    examples::GptLoop loop;
    loop.forward = ddp.get();
    loop.model = model.get();
    loop.optimizer = &run.optimizer;
    loop.scheduler = &run.schedule;
    loop.rank = rank;
    loop.world = world;
    loop.mean_over_ranks = [&pg, world](double v) {
      std::vector<Tensor> t{from_vector<double>({v})};
      pg->allreduce(t)->wait();
      return t[0].item<double>() / world;
    };
    if (!cfg.checkpoint.empty()) loop.writer = &writer;
    loop.state = &state;
    loop.shape = shape;
    loop.metrics = metrics.get();
    if (rank == 0) {
      std::fprintf(stderr,
                   "ddp_gpt: %d ranks, %s (%lld characters, vocabulary %lld), GPT %lld layers x %lld heads x %lld wide, "
                   "block %lld, %lld parameters, batch %lld per rank, %lld steps, %lld DDP buckets, CPU kernels %s\n",
                   world, corpus.source().c_str(), (long long)corpus.text().size(), (long long)corpus.vocab().size(),
                   (long long)cfg.n_layer, (long long)cfg.n_head, (long long)cfg.n_embd, (long long)cfg.block_size,
                   (long long)model->num_parameters(), (long long)cfg.batch, (long long)cfg.max_iters,
                   (long long)ddp->get_ddp_logging_data().num_buckets, cpu_capability());
    }
    const examples::GptResult result = examples::train_gpt(cfg, corpus, loop, pos);
    writer.wait_for_write();
    if (rank == 0) {
      if (cfg.sample > 0) {
        std::printf("--- sample ---\n%s\n--- end of sample ---\n",
                    examples::sample_text(cfg, *model, corpus.vocab(), cfg.sample).c_str());
      }
      examples::print_gpt_result(result, cfg.block_size * cfg.batch * world);
    }
    ddp.reset();
    distributed::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    if (!flags_parsed && rank != 0) return 1;
    flags::report_rank_error(rank, "ddp_gpt", e.what());
    return 1;
  }
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
