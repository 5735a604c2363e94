// Allreduce bus bandwidth on the GPU: ember's ProcessGroupNCCL::allreduce(...).wait() against
// ncclAllReduce called directly on a communicator of its own, in the same job and run (float32,
// in place, sum). One rank per GPU under mpirun (world 1 works: NCCL's single-rank allreduce is a
// device copy). Bandwidths as nccl-tests defines them: algbw = bytes / time, busbw = algbw x
// 2(n-1)/n (0 for one rank: nothing crosses a link). ratio = raw time / ember time (1 is parity).
//   mpirun -np 1 bazel-out/k8-fastbuild/bin/bench/nccl_allreduce_bench [--max_mb=256] [--iters=20]  (--help)
// Rank 0 prints per size:
//   RESULT nccl_allreduce bytes=... world=... ember_us=... raw_us=... ember_busbw_gbs=...
//          raw_busbw_gbs=... ember_algbw_gbs=... raw_algbw_gbs=... ratio=...
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "distributed/backends/nccl/process_group_nccl.h"
#include "distributed/distributed.h"
#include "examples/common/flags.h"
#include "tensor/cuda_stream.h"
#include "tensor/device_backend.h"
#include "tensor/all.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace dist = ember::distributed;

using ember::bench::median;

double max_over_ranks(double x) {
  double y = x;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return y;
}

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) {
    std::fprintf(stderr, "nccl_allreduce_bench: %s failed: %s\n", what, ncclGetErrorString(rc));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "nccl_allreduce_bench: %s failed: %s\n", what, cudaGetErrorString(rc));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// The communicator ncclAllReduce is called on directly: its own unique id, broadcast over MPI.
ncclComm_t raw_communicator(int rank, int world) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world, id, rank), "ncclCommInitRank");
  return comm;
}

}  // namespace

int main(int argc, char** argv) {
  double max_mb = 256;
  int64_t iters = 20;
  const int warmup = 3;
  try {
    ember::flags::CommandLine cli("Allreduce bus bandwidth on the GPU: ProcessGroupNCCL against ncclAllReduce called directly.",
                 "nccl_allreduce_bench");
    cli.add_option("--max_mb", max_mb, "largest message in MiB (sizes 4 KiB, x4, ... up to it)")
        ->check(ember::flags::number_in(0.004, 1 << 20, "between 0.004 and 2^20"));
    cli.add_option("--iters", iters, "timed iterations per size")->check(ember::flags::positive_integer());
    const bool quiet = ember::flags::launcher_rank() != 0;  // every rank parses; rank 0 speaks
    if (cli.parse(argc, argv, !quiet) == ember::flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    if (ember::flags::launcher_rank() == 0) std::fprintf(stderr, "nccl_allreduce_bench: %s\n", e.what());
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (ember::cuda_device_count() == 0) {
    std::printf("nccl_allreduce_bench: no CUDA device visible: nothing to measure\n");
    MPI_Finalize();
    return 0;
  }
  auto pg = dist::init_process_group("nccl");
  const int rank = pg->rank(), world = pg->size();
  const ember::Device device = pg->collective_device();
  check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
  ncclComm_t comm = raw_communicator(rank, world);
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const double bus_factor = world > 1 ? 2.0 * (world - 1) / world : 0.0;
  for (size_t bytes = 4096; bytes <= static_cast<size_t>(max_mb * 1048576.0); bytes *= 4) {
    const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
    ember::Tensor buffer = ember::ones({count}).to(device);
    std::vector<ember::Tensor> list{buffer};
    std::vector<double> ember_us, raw_us;
    for (int it = 0; it < warmup + iters; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = Clock::now();
      pg->allreduce(list)->wait();
      ember::cuda_synchronize(device.index);
      const double e = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = Clock::now();
      check_nccl(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<size_t>(count), ncclFloat,
                               ncclSum, comm, stream),
                 "ncclAllReduce");
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const double r = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (it >= warmup) {
        ember_us.push_back(e);
        raw_us.push_back(r);
      }
      // Keep the values finite: every iteration multiplies them by the world size.
      ember::fill_(buffer, 1.0);
    }
    const double e = max_over_ranks(median(ember_us)), r = max_over_ranks(median(raw_us));
    if (rank == 0) {
      const double ember_alg = bytes / e / 1e3, raw_alg = bytes / r / 1e3;  // GB/s
      std::printf("RESULT nccl_allreduce bytes=%zu world=%d ember_us=%.1f raw_us=%.1f ember_busbw_gbs=%.2f "
                  "raw_busbw_gbs=%.2f ember_algbw_gbs=%.2f raw_algbw_gbs=%.2f ratio=%.3f\n",
                  bytes, world, e, r, ember_alg * bus_factor, raw_alg * bus_factor, ember_alg, raw_alg, r / e);
      std::fflush(stdout);
    }
  }
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  dist::destroy_process_group();
  MPI_Finalize();
  return 0;
}
