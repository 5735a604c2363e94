// Bug: a two-headed model whose two losses are backpropagated one after the other through one DDP
// forward. The first backward (with retain_graph, because autograd asked for it) marks the shared
// trunk's parameters ready; the second reaches the trunk again and DDP refuses to mark them twice.
// Fix: one backward per DDP forward -- sum the losses first: (loss_a + loss_b).backward().
// Run: mpirun -np 2 bazel-bin/examples/debugging/marked_twice [--fixed]
#include <cstdio>
#include <memory>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/debugging/program_flags.h"

namespace ember::examples {

struct TwoHeads : nn::Module {
  std::shared_ptr<nn::Linear> trunk, head_a, head_b;
  TwoHeads() : nn::Module("TwoHeads") {
    trunk = register_module("trunk", std::make_shared<nn::Linear>(8, 16));
    head_a = register_module("head_a", std::make_shared<nn::Linear>(16, 4));
    head_b = register_module("head_b", std::make_shared<nn::Linear>(16, 2));
  }
  std::vector<Tensor> forward_many(const std::vector<Tensor>& x) override {
    Tensor h = relu(trunk->forward(x[0]));
    return {head_a->forward(h), head_b->forward(h)};
  }
};

int example_main(int argc, char** argv) {
  bool fixed = false;
  const auto exit_code = examples::exit_code_from_flags(argc, argv, "marked_twice", &fixed);
  if (exit_code) return *exit_code;
  auto pg = distributed::init_process_group("mpi");
  try {
    Generator gen(pg->rank());  // each rank draws its own data, as each reads its own shard
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(std::make_shared<TwoHeads>());
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      Tensor x = randn({32, 8}, &gen), label = randint(0, 4, {32}, &gen), score = randn({32, 2}, &gen);
      std::vector<Tensor> out = ddp->forward_many({x});
      Tensor loss_a = nn::functional::cross_entropy(out[0], label);
      Tensor loss_b = nn::functional::mse_loss(out[1], score);
      opt.zero_grad();
      if (fixed) {
        (loss_a + loss_b).backward();
      } else {
        loss_a.backward(Tensor(), /*retain_graph=*/true);  // BUG: a second backward follows
        loss_b.backward();
      }
      opt.step();
    }
    std::printf("[rank %d] marked_twice: trained 3 steps\n", pg->rank());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] marked_twice: %s\n", pg->rank(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
