// Bug: only rank 0 averages the loss across ranks for its log line, so rank 0 calls an allreduce
// that rank 1 never calls. From then on the ranks' collectives no longer pair up: rank 0's logging
// allreduce meets rank 1's next gradient allreduce. With EMBER_DISTRIBUTED_DEBUG=DETAIL every
// collective is checked first and the mismatch is reported; without it, the collective times out.
// Fix: every rank takes part in a collective, and only the printing is rank 0's:
// pg->allreduce(avg)->wait(); if (rank == 0) print(avg);
// Run: mpirun -np 2 bazel-bin/examples/debugging/desync [--fixed]
#include <chrono>
#include <cstdio>
#include <memory>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/debugging/program_flags.h"

namespace ember::examples {

int example_main(int argc, char** argv) {
  bool fixed = false;
  const auto exit_code = examples::exit_code_from_flags(argc, argv, "desync", &fixed);
  if (exit_code) return *exit_code;
  distributed::ProcessGroup::Options pg_options;
  pg_options.timeout = std::chrono::seconds(3);  // a hang shows up in seconds, not in 10 minutes
  auto pg = distributed::init_process_group("mpi", pg_options);
  const int rank = pg->rank();
  try {
    Generator gen(rank);
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(nn::make_mlp({8, 32, 4}, &gen));
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 4; ++step) {
      Tensor x = randn({32, 8}, &gen), label = randint(0, 4, {32}, &gen);
      Tensor loss = nn::functional::cross_entropy(ddp->forward(x), label);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (rank == 0 || fixed) {  // BUG: the allreduce below must run on every rank
        std::vector<Tensor> avg{div(loss.detach(), Scalar(pg->size()))};
        pg->allreduce(avg)->wait();
        if (rank == 0) std::printf("step %d: loss %.4f\n", step, avg[0].item<float>());
      }
    }
    std::printf("[rank %d] desync: trained 4 steps\n", rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] desync: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
