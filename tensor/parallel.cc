#include "tensor/parallel.h"

#include <atomic>
#include <cstdlib>

#include "tensor/error.h"

namespace ember {
namespace {

int initial_threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr) return 1;
  const int n = std::atoi(env);
  return n >= 1 ? n : 1;
}

std::atomic<int>& num_threads() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

}  // namespace

int get_num_threads() { return num_threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  EMBER_CHECK(n >= 1, "set_num_threads: expected a positive number of threads, got ", n);
#ifndef _OPENMP
  EMBER_CHECK(n == 1, "set_num_threads(", n, "): this build has no OpenMP; only 1 thread");
#endif
  num_threads().store(n, std::memory_order_relaxed);
}

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

}  // namespace ember
