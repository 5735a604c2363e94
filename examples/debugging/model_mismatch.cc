// Bug: each rank sizes its output layer from the labels in its own shard of the data
// (num_classes = largest label seen + 1). Rank 1's shard happens to hold no sample of the last
// class, so its model is smaller, and DDP's constructor finds that the ranks disagree.
// Fix: take model sizes from the dataset's description, the same on every rank:
// const int64_t num_classes = 10;
// Run: mpirun -np 2 bazel-bin/examples/debugging/model_mismatch [--fixed]
#include <algorithm>
#include <cstdio>
#include <memory>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/debugging/program_flags.h"

namespace ember::examples {

int example_main(int argc, char** argv) {
  bool fixed = false;
  const auto exit_code = examples::exit_code_from_flags(argc, argv, "model_mismatch", &fixed);
  if (exit_code) return *exit_code;
  auto pg = distributed::init_process_group("mpi");
  const int rank = pg->rank();
  try {
    // This rank's shard: rank 1's labels stop at 8.
    Generator gen(rank);
    Tensor x = randn({64, 20}, &gen), labels = randint(0, rank == 1 ? 9 : 10, {64}, &gen);
    const int64_t* l = labels.data_ptr<int64_t>();
    const int64_t seen = *std::max_element(l, l + labels.numel()) + 1;
    const int64_t num_classes = fixed ? 10 : seen;  // BUG: `seen` depends on the shard
    auto model = nn::make_mlp({20, 32, num_classes}, &gen);
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(model);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      Tensor loss = nn::functional::cross_entropy(ddp->forward(x), labels);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    std::printf("[rank %d] model_mismatch: trained 3 steps\n", rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] model_mismatch: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
