#include "examples/common/training.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>

#include "nn/checkpoint.h"
#include "tensor/all.h"
#include "tensor/cpu/capability.h"
#include "tensor/parallel.h"

namespace ember::examples {

TrainConfig parse_flags(int argc, char** argv, const std::string& program, bool* help,
                        const std::map<std::string, Flag>& extra) {
  TrainConfig c;
  *help = false;
  auto i64 = [](int64_t* p) { return [p](const std::string& v) { *p = std::stoll(v); }; };
  auto f64 = [](double* p) { return [p](const std::string& v) { *p = std::stod(v); }; };
  auto str = [](std::string* p) { return [p](const std::string& v) { *p = v; }; };
  std::map<std::string, Flag> flags = {
      {"data", {"Fashion-MNIST directory (IDX files, gzip or raw)", str(&c.data_dir)}},
      {"depth", {"ResNet depth, 6n+2 (20)", i64(&c.depth)}},
      {"width", {"channels of the first stage (16)", i64(&c.width)}},
      {"batch", {"batch size per process (64)", i64(&c.batch)}},
      {"epochs", {"epochs (5)", i64(&c.epochs)}},
      {"lr", {"peak learning rate, cosine-annealed per step (0.1; DDP: 0.1 x world size)", f64(&c.lr)}},
      {"momentum", {"SGD momentum (0.9)", f64(&c.momentum)}},
      {"weight_decay", {"SGD weight decay (5e-4)", f64(&c.weight_decay)}},
      {"label_smoothing", {"cross-entropy label smoothing (0)", f64(&c.label_smoothing)}},
      {"threads", {"intra-op compute threads per process (1)", i64(&c.threads)}},
      {"seed", {"seed for init, shuffling and augmentation (0)", [&](const std::string& v) { c.seed = std::stoull(v); }}},
      {"augment", {"random crop + flip, 0 or 1 (1)", [&](const std::string& v) { c.augment = v != "0"; }}},
      {"max_steps", {"steps per epoch for quick runs (-1 = all)", i64(&c.max_steps)}},
      {"train_limit", {"use only the first N training images (-1 = all)", i64(&c.train_limit)}},
      {"checkpoint", {"write a checkpoint here after every epoch", str(&c.checkpoint)}},
      {"resume", {"continue from this checkpoint", str(&c.resume)}},
  };
  flags.insert(extra.begin(), extra.end());
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: " << program << " [--flag=value ...]\n";
      for (const auto& [name, f] : flags) std::cout << "  --" << name << "  " << f.help << "\n";
      *help = true;
      return c;
    }
    EMBER_CHECK(a.rfind("--", 0) == 0, program, ": unexpected argument '", a, "' (flags are --name=value)");
    const auto eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto it = flags.find(name);
    EMBER_CHECK(it != flags.end(), program, ": unknown flag --", name, " (see --help)");
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else {
      EMBER_CHECK(i + 1 < argc, program, ": flag --", name, " needs a value");
      value = argv[++i];
    }
    try {
      it->second.set(value);
    } catch (const std::exception&) {
      EMBER_THROW(program, ": bad value '", value, "' for --", name);
    }
  }
  EMBER_CHECK(c.threads >= 1 && c.threads <= 1024, program, ": --threads=", c.threads,
              " must be between 1 and 1024");
  EMBER_CHECK(c.batch > 0 && c.epochs > 0, program, ": --batch and --epochs must be positive");
  return c;
}

FashionMnist load_fashion_mnist(const TrainConfig& cfg) {
  FashionMnist d;
  data::MnistSplit train = data::read_mnist(cfg.data_dir, true);
  data::MnistSplit test = data::read_mnist(cfg.data_dir, false);
  if (cfg.train_limit > 0 && cfg.train_limit < train.images.size(0)) {
    train.images = train.images.narrow(0, 0, cfg.train_limit);
    train.labels = train.labels.narrow(0, 0, cfg.train_limit);
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
  int64_t correct = 0;
  for (auto& batch : loader) {
    Tensor pred = argmax(model.forward(batch.data), 1);
    correct += sum(eq(pred, batch.target)).item<int64_t>();
  }
  model.train(was_training);
  return correct;
}

double evaluate(nn::Module& model, const std::shared_ptr<data::TensorDataset>& dataset) {
  const int64_t n = dataset->size();
  return n ? static_cast<double>(count_correct(model, dataset, 0, n)) / static_cast<double>(n) : 0.0;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps)
    : epoch_(epoch), epochs_(epochs), steps_(steps), tty_(isatty(fileno(stderr))) {}

void Progress::update(int64_t step, double loss, double img_per_s) {
  const int64_t pct = steps_ ? (100 * step) / steps_ : 100;
  if (!tty_ && pct / 10 == last_pct_ / 10) return;
  last_pct_ = pct;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * step / std::max<int64_t>(steps_, 1));
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
  std::fprintf(stderr, "%sepoch %lld/%lld [%s] %lld/%lld loss %.4f %.0f img/s%s",
               tty_ ? "\r" : "", static_cast<long long>(epoch_), static_cast<long long>(epochs_),
               bar.c_str(), static_cast<long long>(step), static_cast<long long>(steps_), loss,
               img_per_s, tty_ ? "" : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

EpochStats train_epoch(nn::Module& model, data::DataLoader& loader, optim::Optimizer& opt,
                       optim::LRScheduler& schedule, const nn::CrossEntropyLoss& criterion,
                       int64_t epoch, int64_t epochs, int64_t max_steps, int64_t images_per_step, bool show) {
  model.train();
  loader.set_epoch(epoch);
  Progress progress(epoch + 1, epochs, max_steps);
  const auto start = Clock::now();
  EpochStats st;
  for (auto& batch : loader) {
    if (st.steps == max_steps) break;
    Tensor loss = criterion(model.forward(batch.data), batch.target);
    opt.zero_grad();
    loss.backward();
    opt.step();
    schedule.step();
    ++st.steps;
    const double l = loss.item<double>();
    st.loss = st.steps == 1 ? l : 0.98 * st.loss + 0.02 * l;
    if (show) progress.update(st.steps, st.loss, st.steps * images_per_step / seconds_since(start));
  }
  if (show) progress.finish();
  st.seconds = seconds_since(start);
  return st;
}

void save_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, int64_t epoch) {
  nn::StateDict sd;
  for (auto& kv : model.state_dict()) sd.emplace_back("model." + kv.first, kv.second);
  for (auto& kv : opt.state_dict()) sd.emplace_back("optim." + kv.first, kv.second);
  nn::save(sd, path, {{"epoch", std::to_string(epoch)}, {"format", "ember-train-v1"}});
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt) {
  nn::CheckpointMetadata meta;
  nn::StateDict sd = nn::load(path, &meta);
  nn::StateDict model_sd, opt_sd;
  for (auto& kv : sd) {
    if (kv.first.rfind("model.", 0) == 0) model_sd.emplace_back(kv.first.substr(6), kv.second);
    if (kv.first.rfind("optim.", 0) == 0) opt_sd.emplace_back(kv.first.substr(6), kv.second);
  }
  model.load_state_dict(model_sd);
  opt.load_state_dict(opt_sd);
  auto it = meta.find("epoch");
  EMBER_CHECK(it != meta.end(), "load_checkpoint: ", path, " has no 'epoch' metadata (not a training checkpoint)");
  return std::stoll(it->second);
}

int64_t resume_if_requested(const TrainConfig& cfg, nn::Module& model, optim::Optimizer& opt,
                            optim::LRScheduler& schedule, int64_t steps_per_epoch, bool verbose) {
  if (cfg.resume.empty()) return 0;
  const int64_t epoch = load_checkpoint(cfg.resume, model, opt);
  for (int64_t i = 0; i < epoch * steps_per_epoch; ++i) schedule.step();
  if (verbose) std::fprintf(stderr, "resumed from %s after epoch %lld\n", cfg.resume.c_str(), (long long)epoch);
  return epoch;
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
