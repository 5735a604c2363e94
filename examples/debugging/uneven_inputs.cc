// Bug: the data does not split evenly: rank 0 has 5 batches, rank 1 has 4. After its 4th step
// rank 1 leaves the loop, and rank 0's 5th backward waits for a gradient allreduce that rank 1
// never joins; the group's timeout (3 s here) ends the wait with a message saying inputs look uneven.
// Fix: wrap the loop in Join: a rank out of data then shadows the others' collectives until every
// rank is done: distributed::Join::run({ddp.get()}, {}, [&] { for (...) train_step(); });
// Run: mpirun -np 2 bazel-bin/examples/debugging/uneven_inputs [--fixed]
#include <chrono>
#include <cstdio>
#include <memory>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/debugging/program_flags.h"

namespace ember::examples {

int example_main(int argc, char** argv) {
  bool fixed = false;
  const auto exit_code = examples::exit_code_from_flags(argc, argv, "uneven_inputs", &fixed);
  if (exit_code) return *exit_code;
  distributed::ProcessGroup::Options pg_options;
  pg_options.timeout = std::chrono::seconds(3);  // a hang shows up in seconds, not in 10 minutes
  auto pg = distributed::init_process_group("mpi", pg_options);
  const int rank = pg->rank();
  try {
    Generator gen(rank);
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(nn::make_mlp({8, 32, 4}, &gen));
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
    const int batches = rank == 0 ? 5 : 4;  // 9 batches over 2 ranks
    auto train = [&] {
      for (int step = 0; step < batches; ++step) {
        Tensor x = randn({32, 8}, &gen), label = randint(0, 4, {32}, &gen);
        Tensor loss = nn::functional::cross_entropy(ddp->forward(x), label);
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
    };
    if (fixed) {
      distributed::Join::run({ddp.get()}, distributed::JoinOptions{}, train);
    } else {
      train();  // BUG: the ranks run different numbers of steps
    }
    std::printf("[rank %d] uneven_inputs: trained %d steps\n", rank, batches);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uneven_inputs: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
