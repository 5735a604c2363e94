// Times ResNet training steps (forward, backward, SGD update) and prints where the time goes.
//   bazel-bin/bench/resnet_step_profile [--steps=10] [--batch=64]
#include <chrono>
#include <cstdio>

#include "examples/common/flags.h"
#include "nn/nn.h"
#include "tensor/all.h"

using namespace ember;
using Clock = std::chrono::steady_clock;
namespace flags = ember::flags;

int main(int argc, char** argv) {
  int64_t steps = 10, batch = 64;
  try {
    flags::CommandLine cli("Where a ResNet-20 training step spends its time (forward, backward, update).",
                 "resnet_step_profile");
    cli.add_option("--steps", steps, "timed steps (after 2 untimed)")->check(flags::positive_integer());
    flags::add_batch(cli, &batch, "batch size");
    if (cli.parse(argc, argv) == flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_step_profile: %s\n", e.what());
    return 2;
  }
  Generator gen(0);
  auto net = std::make_shared<nn::ResNet>(nn::ResNetOptions{20, 16, 1, 10}, &gen);
  Tensor x = randn({batch, 1, 28, 28}, &gen);
  Tensor y = randint(0, 10, {batch}, &gen);
  double fwd = 0, bwd = 0, upd = 0;
  for (int64_t s = 0; s < steps + 2; ++s) {
    auto t0 = Clock::now();
    Tensor loss = nn::functional::cross_entropy(net->forward(x), y);
    auto t1 = Clock::now();
    net->zero_grad();
    loss.backward();
    auto t2 = Clock::now();
    {
      NoGradGuard g;
      for (Tensor& p : net->parameters()) add_(p, p.grad(), -0.1);
    }
    auto t3 = Clock::now();
    if (s >= 2) {
      fwd += std::chrono::duration<double, std::milli>(t1 - t0).count();
      bwd += std::chrono::duration<double, std::milli>(t2 - t1).count();
      upd += std::chrono::duration<double, std::milli>(t3 - t2).count();
    }
  }
  std::printf("ms/step: forward %.1f backward %.1f update %.1f total %.1f\n", fwd / steps,
              bwd / steps, upd / steps, (fwd + bwd + upd) / steps);
  return 0;
}
