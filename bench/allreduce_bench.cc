// Allreduce latency and bus bandwidth, ember's ProcessGroupMPI::allreduce(...).wait() against a raw
// MPI_Allreduce loop in the same binary and run (float32, in place, 1 KiB .. 64 MiB).
// raw_nb_us: MPI_Iallreduce + MPI_Test polling, the calls ember's worker makes, without the queue.
// Run with bench/allreduce_bench.sh (2 ranks under mpirun). Prints medians and the ember/raw ratios.
//   allreduce_bench [--rounds=5] [--max_bytes=67108864] [--loop_bytes=268435456] [--dtype=float32|float16]
// (bench/step_model.sh sweeps to 16 MiB with a smaller loop budget over slow links, and float16 for
// the fp16 hook's buckets, which MPI reduces with ember's own operator: no raw loops there, 0.0.)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "distributed/backends/mpi/process_group_mpi.h"
#include "distributed/distributed.h"
#include "examples/common/flags.h"
#include "tensor/factories.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace dist = ember::distributed;

using ember::bench::median;

// The slowest rank's median: a collective is as fast as its slowest participant.
double max_over_ranks(double x) {
  double y = x;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return y;
}

std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20)) std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  else std::snprintf(buf, sizeof buf, "%zu KiB", bytes >> 10);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rounds = 5, max_bytes = 64 << 20, loop_bytes = 256 << 20;
  std::string dtype_name = "float32";
  try {
    ember::flags::CommandLine cli("Allreduce latency and bus bandwidth: ember's ProcessGroupMPI against raw MPI_Allreduce.",
                 "allreduce_bench");
    cli.add_option("--rounds", rounds, "timed rounds per size (one more warms up)")
        ->check(ember::flags::positive_integer());
    cli.add_option("--max_bytes", max_bytes, "largest message in bytes (sizes 1 KiB, x4, ... up to it)")
        ->check(ember::flags::integer_in(1024, int64_t{1} << 40, "between 1024 and 2^40"));
    cli.add_option("--loop_bytes", loop_bytes, "bytes moved per timed loop and size (fewer calls for big sizes)")
        ->check(ember::flags::positive_integer());
    cli.add_option("--dtype", dtype_name, "element type; float16 reduces with ember's own MPI operator (no raw loops)")
        ->check(ember::flags::one_of({"float32", "float16"}));
    const bool quiet = ember::flags::launcher_rank() != 0;  // every rank parses; rank 0 speaks
    if (cli.parse(argc, argv, !quiet) == ember::flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    if (ember::flags::launcher_rank() == 0) std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  auto pg = std::dynamic_pointer_cast<dist::ProcessGroupMPI>(dist::init_process_group("mpi"));
  const int rank = pg->rank();
  const int world = pg->size();
  // The raw loop gets its own communicator too, like ember's (a dup of the world).
  MPI_Comm raw_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw_comm);
  const bool half = dtype_name == "float16";
  const ember::ScalarType dtype = half ? ember::kFloat16 : ember::kFloat32;

  if (rank == 0) {
    std::printf("allreduce %s SUM in place, %d ranks, median per call (slowest rank), %lld rounds\n",
                half ? "float16" : "float32", world, (long long)rounds);
    std::printf("%-8s %10s %10s %10s %10s %12s %14s %8s\n", "size", "raw_us", "raw_nb_us",
                "ember_us", "added_us", "raw_busGB/s", "ember_busGB/s", "ratio");
  }
  for (size_t bytes = 1024; bytes <= static_cast<size_t>(max_bytes); bytes *= 4) {
    const int64_t n = static_cast<int64_t>(bytes / ember::element_size(dtype));
    // Zeros stay zeros under SUM: no overflow to inf however many iterations run.
    ember::Tensor t = ember::zeros({n}, dtype);
    void* data = t.data_ptr();
    // About 0.3 s of work per loop and size in memory (loop_bytes 256 MiB), at least 5 calls.
    const int iters =
        static_cast<int>(std::max<size_t>(5, std::min<size_t>(2000, static_cast<size_t>(loop_bytes) / bytes)));
    std::vector<double> raw_times, nb_times, ember_times;
    std::vector<ember::Tensor> list{t};
    // The three loops alternate in short chunks, so a shared machine's load hits all of them alike.
    const int chunk = std::max(1, iters / 20);
    const int chunks = static_cast<int>(rounds + 1) * (iters / chunk);
    for (int c = 0; c < chunks; ++c) {
      const bool record = c >= iters / chunk;  // the first round warms up
      auto timed = [&](std::vector<double>& out, auto&& call) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < chunk; ++i) {
          const auto start = Clock::now();
          call();
          const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
          if (record) out.push_back(us);
        }
      };
      if (!half) {
        timed(raw_times, [&] {
          MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, raw_comm);
        });
      }
      // What ember's worker does, without the queue: nonblocking allreduce + MPI_Test polling.
      if (!half) timed(nb_times, [&] {
        MPI_Request request;
        MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, raw_comm, &request);
        int done = 0;
        while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      });
      timed(ember_times, [&] { pg->allreduce(list)->wait(); });
    }
    const double raw_us = max_over_ranks(raw_times.empty() ? 0.0 : median(raw_times));
    const double ember_us = max_over_ranks(median(ember_times));
    const double nb_us = max_over_ranks(nb_times.empty() ? 0.0 : median(nb_times));
    // Bus bandwidth as nccl-tests defines it: algorithm bandwidth x 2 (n - 1) / n.
    const double factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
    const double raw_bw = raw_us > 0 ? bytes / (raw_us * 1e-6) * factor / 1e9 : 0.0;
    const double ember_bw = bytes / (ember_us * 1e-6) * factor / 1e9;
    if (rank == 0) {
      std::printf("%-8s %10.1f %10.1f %10.1f %10.1f %12.3f %14.3f %8.3f\n", human(bytes).c_str(),
                  raw_us, nb_us, ember_us, ember_us - raw_us, raw_bw, ember_bw, raw_bw > 0 ? ember_bw / raw_bw : 0.0);
      std::fflush(stdout);
    }
  }
  MPI_Comm_free(&raw_comm);
  dist::destroy_process_group();
  MPI_Finalize();
  return 0;
}
