// Bug: rank 1 dies in the middle of training (here it sends itself SIGKILL at step 3, as the
// kernel's out-of-memory killer would; a segfault or a lost host end a rank as abruptly). What the
// user sees depends on who notices first: usually mpirun, which ends the whole job; when the
// launcher lets the survivors run on, rank 0's next gradient allreduce times out (3 s here) and
// names rank 1 as gone.
// Fix: find why rank 1 died (its own output, a core dump); resume from a checkpoint.
// Run: mpirun -np 2 bazel-bin/examples/debugging/dead_rank
#include <chrono>
#include <cstdio>
#include <csignal>
#include <memory>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/debugging/program_flags.h"

namespace ember::examples {

int example_main(int argc, char** argv) {
  const auto exit_code = examples::exit_code_from_flags(argc, argv, "dead_rank", nullptr);
  if (exit_code) return *exit_code;
  distributed::ProcessGroup::Options pg_options;
  pg_options.timeout = std::chrono::seconds(3);  // a hang shows up in seconds, not in 10 minutes
  auto pg = distributed::init_process_group("mpi", pg_options);
  const int rank = pg->rank();
  try {
    Generator gen(rank);
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(nn::make_mlp({8, 32, 4}, &gen));
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 5; ++step) {
      if (rank == 1 && step == 3) std::raise(SIGKILL);  // BUG: stands for any death of rank 1
      Tensor x = randn({32, 8}, &gen), label = randint(0, 4, {32}, &gen);
      Tensor loss = nn::functional::cross_entropy(ddp->forward(x), label);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    std::printf("[rank %d] dead_rank: trained 5 steps\n", rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] dead_rank: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
