// A rank that dies mid-run (rank 1 exits while rank 0 waits in an allreduce). Run by
// rank_death_test.sh, which expects the job to fail promptly rather than hang: either mpirun aborts
// the job when rank 1 exits, or the surviving ranks' watchdogs time the allreduce out and report it.
// usage: rank_death_bin [BACKEND]   (mpi by default; nccl puts the tensor on the group's GPU)
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <cstdlib>
#include <unistd.h>

#include "distributed/distributed.h"
#include "tensor/device_backend.h"
#include "tensor/factories.h"
#include "tensor/tensor.h"

int main(int argc, char** argv) {
  namespace dist = ember::distributed;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string backend = argc > 1 ? argv[1] : "mpi";
  const auto known = dist::registered_backends();
  if (std::find(known.begin(), known.end(), backend) == known.end() ||
      (backend == "nccl" && ember::cuda_device_count() == 0)) {
    std::printf("SKIPPED: no '%s' backend in this build, or no CUDA device\n", backend.c_str());
    MPI_Finalize();
    return 0;
  }
  dist::ProcessGroup::Options options;
  options.timeout = std::chrono::seconds(5);
  dist::ProcessGroupPtr pg;
  try {
    pg = dist::init_process_group(backend, options);
  } catch (const std::exception& e) {
    // Every rank sees the same: more ranks on this host than GPUs, which real NCCL refuses.
    if (std::string(e.what()).find("NCCL needs a GPU per rank") == std::string::npos) throw;
    std::printf("SKIPPED: %s\n", e.what());
    MPI_Finalize();
    return 0;
  }
  pg->barrier()->wait();
  if (pg->rank() == 1) {
    std::fprintf(stderr, "rank 1: exiting without finalising, as a crashed rank would\n");
    _exit(3);
  }
  std::vector<ember::Tensor> list{ember::ones({16}).to(pg->collective_device())};
  try {
    pg->allreduce(list)->wait();
    std::fprintf(stderr, "rank %d: allreduce unexpectedly succeeded\n", pg->rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", pg->rank(), e.what());
    // A broken group cannot be finalised cleanly; MPI_Abort ends the job with a clear status.
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return 1;
}
