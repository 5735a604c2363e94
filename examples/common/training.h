// What the ResNet trainers share (single-process and DDP): flags, Fashion-MNIST loading and
// transforms, evaluation, a progress line, checkpoints, and the final machine-readable RESULT line.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "data/data.h"
#include "nn/nn.h"
#include "optim/optim.h"

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
  std::string checkpoint;    // written after every epoch (rank 0)
  std::string resume;        // a checkpoint to continue from
};

// A program's own flag beyond TrainConfig's: its --help line and how to store its value.
struct Flag {
  std::string help;
  std::function<void(const std::string&)> set;
};

// --name=value flags (TrainConfig's plus `extra`); --help prints them. Throws ember::Error on an
// unknown or malformed flag.
TrainConfig parse_flags(int argc, char** argv, const std::string& program, bool* help,
                        const std::map<std::string, Flag>& extra = {});

struct FashionMnist {
  std::shared_ptr<data::TensorDataset> train, test;
};
// set_num_threads(cfg.threads); warns when processes_here x threads exceeds this host's cores.
// `print`: say the thread count and the CPU kernels' capability level on stderr.
void use_threads(const TrainConfig& cfg, const std::string& program, int processes_here, bool print);

FashionMnist load_fashion_mnist(const TrainConfig& cfg);
data::TransformList train_transforms(const TrainConfig& cfg);
data::TransformList test_transforms();

std::shared_ptr<nn::ResNet> make_resnet(const TrainConfig& cfg);

// Top-1 accuracy over the whole dataset (eval mode, no grad, batches of 1000).
double evaluate(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset);
// Correct predictions over samples [begin, end) (for splitting evaluation across ranks).
int64_t count_correct(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset,
                      int64_t begin, int64_t end);

struct EpochStats {
  int64_t steps = 0;
  double seconds = 0;
  double loss = 0;  // exponentially smoothed training loss
};
// One training epoch of `model` (a plain module or a DistributedDataParallel wrapper): forward,
// loss, zero_grad, backward, optimizer and per-step schedule; at most `max_steps` steps.
// `images_per_step` scales the img/s shown (the global batch under DDP); `show` draws progress.
EpochStats train_epoch(nn::Module& model, data::DataLoader& loader, optim::Optimizer& opt,
                       optim::LRScheduler& schedule, const nn::CrossEntropyLoss& criterion,
                       int64_t epoch, int64_t epochs, int64_t max_steps, int64_t images_per_step, bool show);

// A one-line progress report, redrawn in place on a terminal and printed every 10% otherwise.
class Progress {
 public:
  Progress(int64_t epoch, int64_t epochs, int64_t steps);
  void update(int64_t step, double loss, double img_per_s);
  void finish();

 private:
  int64_t epoch_, epochs_, steps_, last_pct_ = -1;
  bool tty_;
};

// Model, optimizer and epoch in one safetensors file ("model." / "optim." prefixes).
void save_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, int64_t epoch);
// Returns the epoch stored (training continues after it).
int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt);
// With --resume: loads the checkpoint and fast-forwards the per-step schedule; returns the epoch
// to start from (0 without --resume).
int64_t resume_if_requested(const TrainConfig& cfg, nn::Module& model, optim::Optimizer& opt,
                            optim::LRScheduler& schedule, int64_t steps_per_epoch, bool verbose);
// The trainers' optimizer: SGD with the configured lr, momentum and weight decay.
optim::SGD make_sgd(const TrainConfig& cfg, std::vector<Tensor> params);

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace ember::examples
