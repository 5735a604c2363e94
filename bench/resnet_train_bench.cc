// End-to-end training step of a CIFAR-style ResNet (default ResNet-20, batch 64, 1x28x28, one
// thread): forward + cross-entropy, zero_grad + backward, SGD (momentum 0.9, weight decay 5e-4)
// on a fixed synthetic batch. The PyTorch twin is bench/resnet_train_torch.py; bench/resnet_bench.sh
// runs both and prints the ratio. Output: one machine-readable line
//   RESULT impl=ember model=resnet20 batch=64 steps=N ms_per_step=... fwd_ms=... bwd_ms=... opt_ms=...
//          img_per_s=... peak_rss_mb=... min_ms=...
// (medians over the timed steps; min_ms: the fastest step, steadier than the median where other
// guests share the host; peak RSS from getrusage, i.e. the whole process).
//   bazel-bin/bench/resnet_train_bench --steps=30 --warmup=5 [--batch=64 --depth=20 --width=16]  (--help)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "examples/common/flags.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/all.h"
#include "tensor/cpu/capability.h"
#include "tensor/parallel.h"

using namespace ember;
using Clock = std::chrono::steady_clock;
namespace flags = ember::flags;

namespace {

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

using ember::bench::median;

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 30, warmup = 5, batch = 64, depth = 20, width = 16, threads = 1;
  uint64_t seed = 0;
  bool print_capabilities = false;
  try {
    flags::CommandLine cli("End-to-end ResNet training step (forward, backward, SGD) on a fixed synthetic batch.",
                 "resnet_train_bench");
    cli.add_option("--steps", steps, "timed steps")->check(flags::positive_integer());
    cli.add_option("--warmup", warmup, "untimed steps first")->check(flags::non_negative_integer());
    flags::add_batch(cli, &batch, "batch size");
    cli.add_option("--depth", depth, "ResNet depth, 6n+2")
        ->check(flags::integer_where([](int64_t d) { return d >= 8 && (d - 2) % 6 == 0; }, "6n+2 with n >= 1"));
    cli.add_option("--width", width, "channels of the first stage")->check(flags::positive_integer());
    flags::add_seed(cli, &seed);
    flags::add_threads(cli, &threads);
    // The capability levels this CPU supports, highest first (for bench/resnet_bench.sh).
    cli.add_flag("--print_capabilities", print_capabilities, "print the CPU capability levels and exit");
    if (cli.parse(argc, argv) == flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_train_bench: %s\n", e.what());
    return 2;
  }
  if (print_capabilities) {
    for (int l = static_cast<int>(cpu_capability_supported()); l >= 0; --l) {
      std::printf("%s ", cpu_capability_name(static_cast<CpuCapability>(l)));
    }
    std::printf("\n");
    return 0;
  }
  try {
    set_num_threads(static_cast<int>(threads));
    Generator gen(static_cast<uint64_t>(seed));
    auto net = std::make_shared<nn::ResNet>(nn::ResNetOptions{depth, width, 1, 10}, &gen);
    net->train();
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
    nn::CrossEntropyLoss criterion;
    Tensor x = randn({batch, 1, 28, 28}, &gen);
    Tensor y = randint(0, 10, {batch}, &gen);
    std::vector<double> fwd, bwd, upd, total;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      const auto t0 = Clock::now();
      Tensor loss = criterion(net->forward(x), y);
      const auto t1 = Clock::now();
      opt.zero_grad();
      loss.backward();
      const auto t2 = Clock::now();
      opt.step();
      const auto t3 = Clock::now();
      if (s >= warmup) {
        fwd.push_back(ms(t0, t1));
        bwd.push_back(ms(t1, t2));
        upd.push_back(ms(t2, t3));
        total.push_back(ms(t0, t3));
      }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double step_ms = median(total);
    std::printf(
        "RESULT impl=ember model=resnet%lld batch=%lld steps=%lld threads=%d capability=%s "
        "ms_per_step=%.2f fwd_ms=%.2f bwd_ms=%.2f opt_ms=%.2f img_per_s=%.1f peak_rss_mb=%.1f "
        "min_ms=%.2f\n",
        (long long)depth, (long long)batch, (long long)steps, get_num_threads(), cpu_capability(), step_ms, median(fwd), median(bwd), median(upd),
        step_ms > 0 ? 1000.0 * batch / step_ms : 0.0, ru.ru_maxrss / 1024.0,
        *std::min_element(total.begin(), total.end()));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_train_bench: %s\n", e.what());
    return 1;
  }
}
