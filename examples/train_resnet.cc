// Trains a CIFAR-style ResNet on Fashion-MNIST in one process: SGD with momentum and a per-step
// cosine schedule, test accuracy after every epoch, and a final machine-readable line
//   RESULT test_acc=... img_per_s=... ms_per_step=...
// Run: bazel run //examples:train_resnet -- --epochs=5   (--help lists the flags; --device=cuda
// trains on the GPU in a --config=cuda build; --metrics=FILE.csv|.jsonl writes a row per step)
#include <cstdio>
#include <iostream>
#include <memory>

#include "examples/common/training.h"
#include <ember/tensor.h>

namespace ember::examples {

int example_main(int argc, char** argv) {
  try {
    bool help = false;
    examples::TrainConfig cfg = examples::parse_flags(argc, argv, "train_resnet", &help);
    if (help) return 0;
    examples::use_threads(cfg, "train_resnet", 1, true);
    manual_seed(cfg.seed);
    const auto resume = examples::read_resume_checkpoint(cfg);  // bad files fail before any work
    examples::FashionMnist data = examples::load_fashion_mnist(cfg);
    auto model = examples::make_resnet(cfg);
    model->to(examples::training_device(cfg, 0));
    data::DataLoader loader(data.train, data::DataLoaderOptions{cfg.batch, true, cfg.seed, true, true, 2},
                            examples::train_transforms(cfg));
    const int64_t steps = cfg.max_steps > 0 ? std::min(cfg.max_steps, loader.num_batches()) : loader.num_batches();
    optim::SGD opt = examples::make_sgd(cfg, model->parameters());
    optim::CosineAnnealingLR schedule(opt, cfg.epochs * steps);
    const examples::TrainState state{model.get(), &opt, &schedule};
    const examples::TrainShape shape{cfg.seed, 1, cfg.batch, steps};
    examples::TrainPosition pos = examples::resume_from(resume, state, shape, 0, true);
    examples::CheckpointWriter writer({cfg.checkpoint, 0, nullptr, !cfg.checkpoint_in_line});
    const auto after_step = examples::after_step_actions(cfg, writer, state, shape, 0);
    nn::CrossEntropyLoss criterion(Reduction::kMean, cfg.label_smoothing);
    // One process: the metrics' overlap and bytes_sent stay 0 (metrics_writer.h).
    std::unique_ptr<examples::MetricsWriter> metrics;
    if (!cfg.metrics.empty()) metrics = std::make_unique<examples::MetricsWriter>(cfg.metrics, resume.has_value());
    std::fprintf(stderr, "ResNet-%lld (width %lld, %zu parameter tensors), batch %lld, %lld steps/epoch\n",
                 (long long)cfg.depth, (long long)cfg.width, model->parameters().size(),
                 (long long)cfg.batch, (long long)steps);
    double train_seconds = 0, acc = 0;
    int64_t trained_steps = 0;
    for (; pos.epoch < cfg.epochs; ++pos.epoch, pos.step = 0) {
      examples::EpochOptions eo{pos.epoch, cfg.epochs, steps, pos, cfg.batch, true, after_step};
      eo.metrics = metrics.get();
      eo.before_backward = [&writer] { writer.wait_for_write(); };
      examples::EpochStats st = examples::train_epoch(*model, loader, opt, schedule, criterion, eo);
      pos.global_step += st.steps;
      train_seconds += st.seconds;
      trained_steps += st.steps;
      acc = examples::evaluate(*model, data.test);
      std::printf("epoch %lld: train loss %.4f, test accuracy %.4f\n", (long long)(pos.epoch + 1), st.loss, acc);
      std::fflush(stdout);
      if (!cfg.checkpoint.empty()) writer.save(state, {pos.epoch, steps, pos.global_step}, shape);
    }
    writer.wait_for_write();  // the last checkpoint is in place before the RESULT line
    const double ms_per_step = trained_steps ? 1000.0 * train_seconds / trained_steps : 0.0;
    std::printf("RESULT test_acc=%.4f img_per_s=%.1f ms_per_step=%.2f\n", acc,
                trained_steps ? trained_steps * cfg.batch / train_seconds : 0.0, ms_per_step);
    const std::string cost =
        examples::checkpoint_cost_summary(writer.cost(), 1000.0 * train_seconds, trained_steps, cfg.checkpoint_every);
    if (!cost.empty()) std::fprintf(stderr, "%s\n", cost.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_resnet: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
