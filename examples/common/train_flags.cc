// The trainers' command line (train_resnet, ddp_resnet): TrainConfig's flags (examples/common/flags.h).
#include <limits>

#include "examples/common/flags.h"
#include "examples/common/metrics_writer.h"
#include "examples/common/training.h"
#include <ember/tensor.h>

namespace ember::examples {
namespace {

// ResNet for CIFAR: depth 6n+2 (n blocks per stage, three stages, plus the stem and the head).
flags::Check resnet_depth() {
  return flags::integer_where([](int64_t d) { return d >= 8 && d <= (1 << 20) && (d - 2) % 6 == 0; },
                              "6n+2 with n >= 1 (8, 14, 20, 32, ...)");
}

}  // namespace

flags::Check metrics_path() {
  return flags::Check{
      [](const std::string& text) -> std::string {
        try {
          metrics_format_of(text);
          return "";
        } catch (const Error& e) {
          return e.what();
        }
      },
      "FILE.csv|FILE.jsonl"};
}

void add_train_flags(flags::CommandLine& cli, TrainConfig* c) {
  const double kMax = std::numeric_limits<double>::max();
  cli.add_option("--data", c->data_dir, "Fashion-MNIST directory (IDX files, gzip or raw)");
  cli.add_option("--depth", c->depth, "ResNet depth")->check(resnet_depth());
  cli.add_option("--width", c->width, "channels of the first stage")->check(flags::positive_integer());
  flags::add_batch(cli, &c->batch, "batch size per process");
  cli.add_option("--epochs", c->epochs, "epochs")->check(flags::positive_integer());
  cli.add_option("--lr", c->lr, "peak learning rate, cosine-annealed per step (DDP: 0.1 x world size)")
      ->check(flags::number_in(std::numeric_limits<double>::min(), kMax, "positive"));
  cli.add_option("--momentum", c->momentum, "SGD momentum")->check(flags::number_in(0, kMax, "non-negative"));
  cli.add_option("--weight_decay", c->weight_decay, "SGD weight decay")
      ->check(flags::number_in(0, kMax, "non-negative"));
  cli.add_option("--label_smoothing", c->label_smoothing, "cross-entropy label smoothing")
      ->check(flags::number_in(0, 1, "in [0, 1]"));
  flags::add_threads(cli, &c->threads);
  flags::add_seed(cli, &c->seed);
  cli.add_option("--augment", c->augment, "random crop + horizontal flip, 0 or 1")->check(flags::zero_or_one());
  cli.add_option("--max_steps", c->max_steps, "steps per epoch for quick runs (-1 = all)")
      ->check(flags::positive_or_minus_one());
  cli.add_option("--train_limit", c->train_limit, "use only the first N training images (-1 = all)")
      ->check(flags::positive_or_minus_one());
  cli.add_option("--test_limit", c->test_limit, "evaluate on the first N test images only (-1 = all)")
      ->check(flags::positive_or_minus_one());
  cli.add_option("--checkpoint", c->checkpoint,
                 "write a checkpoint here after every epoch (and every --checkpoint_every steps)");
  cli.add_option("--checkpoint_every", c->checkpoint_every, "steps between checkpoints (0 = only at epoch ends)")
      ->check(flags::non_negative_integer());
  cli.add_option("--checkpoint_in_line", c->checkpoint_in_line,
                 "write checkpoints on the training thread, not beside the next step (0 or 1)")
      ->check(flags::zero_or_one());
  cli.add_option("--resume", c->resume,
                 "continue exactly from this checkpoint (model, optimizer, schedule, RNG, data position)");
  flags::add_device(cli, &c->device);
  cli.add_option("--metrics", c->metrics,
                 "per-step metrics (step, epoch, loss, lr, img_per_s, ms_per_step, overlap, bytes_sent) "
                 "written by rank 0 as CSV (FILE.csv) or JSON lines (FILE.jsonl)")
      ->check(metrics_path());
}

void check_train_config(const TrainConfig& c) {
  EMBER_CHECK(c.checkpoint_every == 0 || !c.checkpoint.empty(),
              "--checkpoint_every needs --checkpoint=PATH to say where");
}

TrainConfig parse_flags(int argc, char** argv, const std::string& program, bool* help,
                        const std::function<void(flags::CommandLine&)>& extra, bool print_help) {
  TrainConfig c;
  flags::CommandLine cli("Trains a CIFAR-style ResNet on Fashion-MNIST (--help: every flag with its default).", program);
  add_train_flags(cli, &c);
  if (extra) extra(cli);
  *help = cli.parse(argc, argv, print_help) == flags::Parsed::kHelp;
  if (*help) return c;
  c.lr_given = cli.count("--lr") > 0;
  check_train_config(c);
  return c;
}

}  // namespace ember::examples
