// What the ResNet trainers share (single-process and DDP): flags, Fashion-MNIST loading and
// transforms, evaluation, a progress line, checkpoints, and the final machine-readable RESULT line.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <ember/data.h>
#include <ember/optim.h>

#include "examples/common/flags.h"
#include "examples/common/metrics_writer.h"
#include "examples/common/train_checkpoint.h"

namespace ember::examples {

struct TrainConfig {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t depth = 20;
  int64_t width = 16;
  int64_t batch = 64;        // per process
  int64_t epochs = 5;
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  double label_smoothing = 0.0;
  int64_t threads = 1;
  uint64_t seed = 0;
  bool augment = true;       // random crop (padding 2) + horizontal flip
  int64_t max_steps = -1;    // per epoch, for quick runs (-1: the whole epoch)
  int64_t train_limit = -1;  // use only the first N training images (-1: all)
  int64_t test_limit = -1;   // evaluate on the first N test images only (-1: all)
  std::string checkpoint;    // written after every epoch (rank 0), and every checkpoint_every steps
  int64_t checkpoint_every = 0;  // steps between checkpoints (0: only at the end of each epoch)
  bool checkpoint_in_line = false;  // write checkpoints on the training thread (Note [Checkpoints off the training thread])
  std::string resume;        // a checkpoint to continue from, exactly (train_checkpoint.h)
  std::string device = "cpu";  // "cpu" or "cuda" (one GPU per process: training_device)
  std::string metrics;       // per-step metrics, .csv or .jsonl, written by rank 0 (metrics_writer.h)
  bool lr_given = false;     // --lr was on the command line (DDP scales the default by the world size)
};

// --metrics's check: the format comes from the extension, so a typo fails before any training.
flags::Check metrics_path();
// TrainConfig's flags (examples/common/flags.h), each checked as it is read.
void add_train_flags(flags::CommandLine& cli, TrainConfig* cfg);
// The checks that involve several flags (--checkpoint_every needs --checkpoint, ...); throws.
void check_train_config(const TrainConfig& cfg);

// A trainer's command line: TrainConfig's flags plus the program's own, added by `extra`. --help
// prints the generated usage (when `print_help`: rank 0 of a job) and sets *help. Throws
// ember::Error, one line naming the flag and value, on an unknown flag, a malformed value
// ("--batch=abc", "--batch=12x") or one out of range ("--epochs=-1", "--depth=10").
TrainConfig parse_flags(int argc, char** argv, const std::string& program, bool* help,
                        const std::function<void(flags::CommandLine&)>& extra = {}, bool print_help = true);

struct FashionMnist {
  std::shared_ptr<data::TensorDataset> train, test;
};
// set_num_threads(cfg.threads); warns when processes_here x threads exceeds this host's cores.
// `print`: say the thread count and the CPU kernels' capability level on stderr.
void use_threads(const TrainConfig& cfg, const std::string& program, int processes_here, bool print);

// Where this process trains: the CPU, or for --device=cuda the GPU of its local rank (`local_rank`
// modulo the visible GPUs, as ProcessGroupNCCL chooses). Throws naming the flag when ember was
// built without CUDA or no GPU is visible.
Device training_device(const TrainConfig& cfg, int local_rank);

FashionMnist load_fashion_mnist(const TrainConfig& cfg);
data::TransformList train_transforms(const TrainConfig& cfg);
data::TransformList test_transforms();

std::shared_ptr<nn::ResNet> make_resnet(const TrainConfig& cfg);

// Top-1 accuracy over the whole dataset (eval mode, no grad, batches of 1000).
double evaluate(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset);
// Correct predictions over samples [begin, end) (for splitting evaluation across ranks), computed
// on the device of the model's parameters.
int64_t count_correct(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset,
                      int64_t begin, int64_t end);

struct EpochStats {
  int64_t steps = 0;
  double seconds = 0;
  double loss = 0;  // exponentially smoothed training loss
};
// Fault injection for the resume and fault tests: with EMBER_FAULT_KILL_AT_STEP=G (and optionally
// EMBER_FAULT_KILL_RANK=R, default every rank) the process sends itself SIGKILL -- a real kill -9 --
// right after global step G. The trainers call it after every step. Under the restarting launcher it
// fires in the first EMBER_FAULT_ATTEMPTS attempts only (distributed/diagnostics/fault_injection.h).
void maybe_kill_at_step(int64_t global_step, int rank);

struct EpochOptions {
  int64_t epoch = 0;             // 0-based
  int64_t epochs = 1;
  int64_t steps = 0;             // steps in a whole epoch
  TrainPosition start;           // where this epoch starts (start.step > 0 when resuming mid-epoch)
  int64_t images_per_step = 0;   // for the img/s shown (the global batch under DDP)
  bool show = false;             // draw progress
  // Called after every step with the position reached (checkpoints, fault injection).
  std::function<void(const TrainPosition&)> after_step;
  // Called before every backward (Note [Checkpoints off the training thread]).
  std::function<void()> before_backward;
  // --metrics (rank 0 only; null: none): a row per step. `step_extras` fills in what only the
  // caller knows before the row is written (DDP's overlap and bytes sent).
  MetricsWriter* metrics = nullptr;
  std::function<void(StepMetrics&)> step_extras;
};
// One training epoch of `model` (a plain module or a DistributedDataParallel wrapper), from
// options.start.step to options.steps: forward, loss, zero_grad, backward, optimizer and per-step
// schedule. Batches go to the device of the model's parameters.
EpochStats train_epoch(nn::Module& model, data::DataLoader& loader, optim::Optimizer& opt,
                       optim::LRScheduler& schedule, const nn::CrossEntropyLoss& criterion,
                       const EpochOptions& options);

// A one-line progress report, redrawn in place on a terminal and printed every 10% otherwise.
class Progress {
 public:
  // `unit` names the rate update() is given (images or tokens per second).
  Progress(int64_t epoch, int64_t epochs, int64_t steps, const char* unit = "img/s");
  void update(int64_t step, double loss, double per_s);
  void finish();

 private:
  int64_t epoch_, epochs_, steps_, last_pct_ = -1;
  const char* unit_;
  bool tty_;
};

// What both trainers do after every step: a checkpoint every --checkpoint_every steps (except at an
// epoch's last step, whose checkpoint follows the evaluation) and maybe_kill_at_step. `writer`
// and `state` must outlive the returned function.
std::function<void(const TrainPosition&)> after_step_actions(const TrainConfig& cfg, CheckpointWriter& writer,
                                                             const TrainState& state, const TrainShape& shape,
                                                             int rank);

// With --resume: reads the checkpoint (before the run is built, to check and adopt its shape).
std::optional<LoadedCheckpoint> read_resume_checkpoint(const TrainConfig& cfg);
// Restores `state` from a --resume checkpoint and returns where to continue; rank 0 (`verbose`)
// says so on stderr, with any warning about what could not be restored exactly.
TrainPosition resume_from(const std::optional<LoadedCheckpoint>& ckpt, const TrainState& state,
                          const TrainShape& now, int rank, bool verbose);
// The trainers' optimizer: SGD with the configured lr, momentum and weight decay.
optim::SGD make_sgd(const TrainConfig& cfg, std::vector<Tensor> params);

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace ember::examples
