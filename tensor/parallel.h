// Intra-op parallelism through OpenMP (GCC's libgomp), as PyTorch's ATen/ParallelOpenMP.h.
// set_num_threads(n) sets the threads every parallel kernel uses; kernels split work with
// parallel_for. Note [Deterministic parallel kernels]: a kernel's result never depends on the
// number of threads. Work is split only where elements are independent (an image, an output
// channel, a run of elements); sums over a split dimension use fixed-size chunks whose partial
// results are combined in chunk order, so 1 and 16 threads give the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

// Threads used by intra-op parallel kernels (>= 1). Defaults to OMP_NUM_THREADS if set, else 1:
// DDP runs one process per core, and a process does not take the whole machine unasked.
int get_num_threads();
// n >= 1; throws otherwise.
void set_num_threads(int n);
// True inside a parallel_for body (nested regions run serially).
bool in_parallel_region();

// Calls f(begin, end) on disjoint chunks covering [begin, end), in parallel when the range is
// larger than `grain` and more than one thread is set. Chunks are contiguous and ordered.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  const int threads = get_num_threads();
  if (threads == 1 || n <= grain || in_parallel_region()) {
    f(begin, end);
    return;
  }
#ifdef _OPENMP
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int use = static_cast<int>(std::min<int64_t>(threads, max_chunks));
  // An exception may not leave an OpenMP region: the first one is kept and rethrown here.
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(use)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t lo = begin + t * chunk, hi = std::min(end, lo + chunk);
    try {
      if (lo < hi) f(lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
#else
  f(begin, end);
#endif
}

}  // namespace ember
