#include "examples/common/training.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "examples/common/kill_fault.h"
#include <ember/nn.h>

namespace ember::examples {

Device training_device(const TrainConfig& cfg, int local_rank) {
  if (cfg.device == "cpu") return kCPU;
  EMBER_CHECK(cuda_is_available(), "--device=cuda: ",
              has_device_backend(DeviceType::kCUDA) ? "no CUDA device is visible"
                                                   : "ember was built without CUDA (build with --config=cuda)");
  return cuda_device_of_local_rank(local_rank);
}

namespace {

// The device `model` computes on: its parameters' (the CPU for a model without any).
Device device_of(nn::Module& model) {
  const std::vector<Tensor> params = model.parameters();
  return params.empty() ? kCPU : params[0].device();
}

}  // namespace

FashionMnist load_fashion_mnist(const TrainConfig& cfg) {
  FashionMnist d;
  data::MnistSplit train = data::read_mnist(cfg.data_dir, true);
  data::MnistSplit test = data::read_mnist(cfg.data_dir, false);
  if (cfg.train_limit > 0 && cfg.train_limit < train.images.size(0)) {
    train.images = train.images.narrow(0, 0, cfg.train_limit);
    train.labels = train.labels.narrow(0, 0, cfg.train_limit);
  }
  if (cfg.test_limit > 0 && cfg.test_limit < test.images.size(0)) {
    test.images = test.images.narrow(0, 0, cfg.test_limit);
    test.labels = test.labels.narrow(0, 0, cfg.test_limit);
  }
  d.train = std::make_shared<data::TensorDataset>(train.images, train.labels);
  d.test = std::make_shared<data::TensorDataset>(test.images, test.labels);
  return d;
}

// Fashion-MNIST's training-set mean and standard deviation.
constexpr double kMean = 0.2860, kStd = 0.3530;

data::TransformList train_transforms(const TrainConfig& cfg) {
  data::TransformList t;
  if (cfg.augment) {
    t.push_back(std::make_shared<data::RandomCrop>(28, 2));
    t.push_back(std::make_shared<data::RandomHorizontalFlip>(0.5));
  }
  t.push_back(std::make_shared<data::Normalize>(std::vector<double>{kMean}, std::vector<double>{kStd}));
  return t;
}

data::TransformList test_transforms() {
  return {std::make_shared<data::Normalize>(std::vector<double>{kMean}, std::vector<double>{kStd})};
}

std::shared_ptr<nn::ResNet> make_resnet(const TrainConfig& cfg) {
  Generator gen(cfg.seed);
  return std::make_shared<nn::ResNet>(nn::ResNetOptions{cfg.depth, cfg.width, 1, 10}, &gen);
}

int64_t count_correct(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset,
                      int64_t begin, int64_t end) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  auto slice = std::make_shared<data::TensorDataset>(dataset->data().narrow(0, begin, end - begin),
                                                     dataset->targets().narrow(0, begin, end - begin));
  data::DataLoader loader(slice, data::DataLoaderOptions{1000, false, 0, false, true, 2}, test_transforms());
  const Device device = device_of(model);
  int64_t correct = 0;
  for (auto& batch : loader) {
    Tensor pred = argmax(model.forward(batch.data.to(device)), 1);
    correct += sum(eq(pred, batch.target.to(device))).item<int64_t>();
  }
  model.train(was_training);
  return correct;
}

double evaluate(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset) {
  const int64_t n = dataset->size();
  return n ? static_cast<double>(count_correct(model, dataset, 0, n)) / static_cast<double>(n) : 0.0;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps, const char* unit)
    : epoch_(epoch), epochs_(epochs), steps_(steps), unit_(unit), tty_(isatty(fileno(stderr))) {}

void Progress::update(int64_t step, double loss, double per_s) {
  const int64_t pct = steps_ ? (100 * step) / steps_ : 100;
  if (!tty_ && pct / 10 == last_pct_ / 10) return;
  last_pct_ = pct;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * step / std::max<int64_t>(steps_, 1));
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
  std::fprintf(stderr, "%sepoch %lld/%lld [%s] %lld/%lld loss %.4f %.0f %s%s",
               tty_ ? "\r" : "", static_cast<long long>(epoch_), static_cast<long long>(epochs_),
               bar.c_str(), static_cast<long long>(step), static_cast<long long>(steps_), loss,
               per_s, unit_, tty_ ? "" : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

EpochStats train_epoch(nn::Module& model, data::DataLoader& loader, optim::Optimizer& opt,
                       optim::LRScheduler& schedule, const nn::CrossEntropyLoss& criterion,
                       const EpochOptions& options) {
  model.train();
  loader.set_epoch(options.epoch);
  loader.set_start_batch(options.start.step);
  Progress progress(options.epoch + 1, options.epochs, options.steps);
  const auto start = Clock::now();
  EpochStats st;
  TrainPosition pos = options.start;
  const Device device = device_of(model);
  // A step's time runs from the end of the previous one (so it includes loading its batch) to its
  // loss on the host, and leaves out after_step's checkpoints.
  auto step_start = start;
  for (auto& batch : loader) {
    if (pos.step == options.steps) break;
    const double lr = schedule.get_last_lr().empty() ? 0.0 : schedule.get_last_lr()[0];
    Tensor loss = criterion(model.forward(batch.data.to(device)), batch.target.to(device));
    opt.zero_grad();
    if (options.before_backward) options.before_backward();
    loss.backward();
    opt.step();
    schedule.step();
    ++st.steps;
    ++pos.step;
    ++pos.global_step;
    const double l = loss.item<double>();
    st.loss = st.steps == 1 ? l : 0.98 * st.loss + 0.02 * l;
    if (options.metrics) {
      const double step_s = seconds_since(step_start);
      StepMetrics m;
      m.step = pos.global_step;
      m.epoch = options.epoch + 1;
      m.loss = l;
      m.lr = lr;
      m.img_per_s = step_s > 0 ? options.images_per_step / step_s : 0.0;
      m.ms_per_step = 1000.0 * step_s;
      if (options.step_extras) options.step_extras(m);
      options.metrics->write(m);
    }
    if (options.show) {
      progress.update(pos.step, st.loss, st.steps * options.images_per_step / seconds_since(start));
    }
    if (options.after_step) options.after_step(pos);
    step_start = Clock::now();
  }
  if (options.show) progress.finish();
  st.seconds = seconds_since(start);
  return st;
}

void maybe_kill_at_step(int64_t global_step, int rank) {
  maybe_kill_self("EMBER_FAULT_KILL_AT_STEP", global_step, rank);
}

std::function<void(const TrainPosition&)> after_step_actions(const TrainConfig& cfg, CheckpointWriter& writer,
                                                             const TrainState& state, const TrainShape& shape,
                                                             int rank) {
  return [every = cfg.checkpoint_every, &writer, &state, shape, rank](const TrainPosition& p) {
    if (every > 0 && p.global_step % every == 0 && p.step < shape.steps_per_epoch) writer.save(state, p, shape);
    maybe_kill_at_step(p.global_step, rank);
  };
}

std::optional<LoadedCheckpoint> read_resume_checkpoint(const TrainConfig& cfg) {
  if (cfg.resume.empty()) return std::nullopt;
  return read_checkpoint(cfg.resume);
}

TrainPosition resume_from(const std::optional<LoadedCheckpoint>& ckpt, const TrainState& state,
                          const TrainShape& now, int rank, bool verbose) {
  if (!ckpt) return TrainPosition{};
  const TrainPosition pos = restore_checkpoint(*ckpt, state, now, rank, [verbose](const std::string& w) {
    if (verbose) std::fprintf(stderr, "resume: warning: %s\n", w.c_str());
  });
  if (verbose) {
    std::fprintf(stderr, "resumed from %s at global step %lld: epoch %lld, step %lld of %lld\n",
                 ckpt->path.c_str(), (long long)ckpt->position.global_step, (long long)(pos.epoch + 1),
                 (long long)pos.step, (long long)now.steps_per_epoch);
  }
  return pos;
}

optim::SGD make_sgd(const TrainConfig& cfg, std::vector<Tensor> params) {
  return optim::SGD(std::move(params),
                    optim::SGDOptions(cfg.lr).momentum(cfg.momentum).weight_decay(cfg.weight_decay));
}

void use_threads(const TrainConfig& cfg, const std::string& program, int processes_here, bool print) {
  set_num_threads(static_cast<int>(cfg.threads));
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && cfg.threads * processes_here > cores) {
    std::fprintf(stderr,
                 "%s: warning: %d process(es) x --threads=%lld = %lld threads on this host, which has "
                 "%ld cores; threads will share cores and each step gets slower\n",
                 program.c_str(), processes_here, (long long)cfg.threads,
                 (long long)(cfg.threads * processes_here), cores);
  }
  if (print) {
    std::fprintf(stderr, "%s: %lld thread(s) per process, CPU kernels: %s (%s)\n", program.c_str(),
                 (long long)cfg.threads, cpu_capability(), cpu_vector_extensions());
  }
}

}  // namespace ember::examples
