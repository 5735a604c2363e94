// Trains a character-level GPT (nanoGPT's model) in one process:
//   bazel-bin/examples/train_gpt --max_iters=2000 --batch=24 --sample=300
// The same model, data, optimizer and loop as ddp_gpt (examples/common/gpt_training.h); its
// --batch is the whole batch, so train_gpt --batch=2B draws the batches ddp_gpt --batch=B draws
// on 2 ranks together. The last line is the RESULT line.
#include <cstdio>
#include <memory>

#include "examples/common/flags.h"
#include "examples/common/gpt_training.h"
#include "examples/common/training.h"

namespace ember::examples {

int example_main(int argc, char** argv) {
  try {
    bool help = false;
    examples::GptTrainConfig cfg = examples::parse_gpt_flags(argc, argv, "train_gpt", &help);
    if (help) return 0;
    std::unique_ptr<examples::MetricsWriter> metrics;
    if (!cfg.metrics.empty()) metrics = std::make_unique<examples::MetricsWriter>(cfg.metrics, !cfg.resume.empty());
    examples::GptRun run(cfg);
    const data::TextCorpus& corpus = run.corpus;
    const std::shared_ptr<nn::GPT>& model = run.model;
    const examples::TrainState state = run.state();
    const examples::TrainShape shape{cfg.seed, 1, cfg.batch, cfg.max_iters};
    examples::TrainPosition pos = examples::resume_from(run.resume, state, shape, 0, true);
    examples::CheckpointWriter writer({cfg.checkpoint, 0, nullptr, true});
    examples::GptLoop loop;
    loop.forward = model.get();
    loop.model = model.get();
    loop.optimizer = &run.optimizer;
    loop.scheduler = &run.schedule;
    if (!cfg.checkpoint.empty()) loop.writer = &writer;
    loop.state = &state;
    loop.shape = shape;
    loop.metrics = metrics.get();
    std::fprintf(stderr, "train_gpt: %s (%lld characters, vocabulary %lld), %lld parameters, batch %lld, %lld steps\n",
                 corpus.source().c_str(), (long long)corpus.text().size(), (long long)corpus.vocab().size(),
                 (long long)model->num_parameters(), (long long)cfg.batch, (long long)cfg.max_iters);
    const examples::GptResult result = examples::train_gpt(cfg, corpus, loop, pos);
    writer.wait_for_write();
    if (cfg.sample > 0) {
      std::printf("--- sample ---\n%s\n--- end of sample ---\n",
                  examples::sample_text(cfg, *model, corpus.vocab(), cfg.sample).c_str());
    }
    examples::print_gpt_result(result, cfg.block_size * cfg.batch);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gpt: %s\n", e.what());
    return 1;
  }
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
