// Bug: the model has a layer that this training run never uses (an auxiliary head switched off by
// a config flag), and DDP was built without find_unused_parameters. The unused parameters never
// get a gradient, so their bucket is never reduced, and the next forward refuses to start.
// Fix: tell DDP that some parameters may go unused: options.find_unused_parameters = true
// (or do not register modules the run does not use).
// Run: mpirun -np 2 bazel-bin/examples/debugging/unfinished_reduction [--fixed]
#include <cstdio>
#include <memory>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/debugging/program_flags.h"

namespace ember::examples {

struct Classifier : nn::Module {
  bool use_aux_head = false;  // from the run's config
  std::shared_ptr<nn::Linear> body, head, aux_head;
  Classifier() : nn::Module("Classifier") {
    body = register_module("body", std::make_shared<nn::Linear>(8, 16));
    head = register_module("head", std::make_shared<nn::Linear>(16, 4));
    aux_head = register_module("aux_head", std::make_shared<nn::Linear>(16, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(body->forward(x));
    Tensor logits = head->forward(h);
    return use_aux_head ? logits + aux_head->forward(h) : logits;
  }
};

int example_main(int argc, char** argv) {
  bool fixed = false;
  const auto exit_code = examples::exit_code_from_flags(argc, argv, "unfinished_reduction", &fixed);
  if (exit_code) return *exit_code;
  auto pg = distributed::init_process_group("mpi");
  try {
    Generator gen(pg->rank());  // each rank draws its own data, as each reads its own shard
    distributed::DDPOptions options;
    if (fixed) options.find_unused_parameters = true;  // BUG without it: aux_head gets no gradient
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(std::make_shared<Classifier>(), options);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      Tensor x = randn({32, 8}, &gen), label = randint(0, 4, {32}, &gen);
      Tensor loss = nn::functional::cross_entropy(ddp->forward(x), label);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    std::printf("[rank %d] unfinished_reduction: trained 3 steps\n", pg->rank());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] unfinished_reduction: %s\n", pg->rank(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
