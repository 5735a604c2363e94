// A job whose rank stalls (EMBER_FAULT_STALL_*, distributed/diagnostics/fault_injection.h) in a loop of
// allreduces on the default group, whose timeout is 3 s. Run by stall_fault_test.sh, which expects
// the other ranks to fail within the timeout with one line naming the collective, its sequence
// number and the stalled rank, and the job to end instead of hanging.
#include <mpi.h>

#include <cstdio>

#include "distributed/distributed.h"
#include "tensor/factories.h"

int main(int argc, char** argv) {
  namespace dist = ember::distributed;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  dist::ProcessGroup::Options options;
  options.timeout = std::chrono::seconds(3);
  auto pg = dist::init_process_group("mpi", options);
  try {
    for (int i = 0; i < 6; ++i) {
      std::vector<ember::Tensor> list{ember::ones({16})};
      pg->allreduce(list)->wait();
    }
    std::fprintf(stderr, "rank %d: every allreduce succeeded\n", pg->rank());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", pg->rank(), e.what());
    // The group is broken and cannot be finalised cleanly; MPI_Abort ends the job, the stalled
    // rank included.
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  dist::destroy_process_group();
  return 0;
}
