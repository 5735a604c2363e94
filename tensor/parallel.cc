#include "tensor/parallel.h"

#include <algorithm>
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

namespace detail {
namespace {

constexpr uint64_t pack(int64_t front, int64_t back) {
  return (static_cast<uint64_t>(front) << 32) | static_cast<uint64_t>(back);
}

}  // namespace

void set_piece_run(PieceRun& run, int64_t front, int64_t back) {
  // A region's pieces number far below 2^32 (threads x kPiecesPerThread, or Note [Two-part
  // regions]'s heavy items + threads x kLightPiecesPerThread).
  run.bounds.store(pack(front, back), std::memory_order_relaxed);
}

bool take_piece(PieceRun& run, bool from_back, int64_t* piece) {
  uint64_t bounds = run.bounds.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = static_cast<int64_t>(bounds >> 32);
    const int64_t back = static_cast<int64_t>(bounds & 0xffffffffu);
    if (front >= back) return false;
    const uint64_t rest = from_back ? pack(front, back - 1) : pack(front + 1, back);
    if (run.bounds.compare_exchange_weak(bounds, rest, std::memory_order_relaxed)) {
      *piece = from_back ? back - 1 : front;
      return true;
    }
  }
}

namespace {

// Cuts one share [lo, hi) into pieces that shrink towards its back (Note [Balanced parallel_for]):
// writes their first elements to starts and returns how many.
int64_t cut_share(int64_t lo, int64_t hi, int64_t per_thread, int64_t min_piece, int64_t* starts) {
  const int64_t quarter = std::max(min_piece, (hi - lo + 3) / 4);
  int64_t pieces = 0;
  for (int64_t k = 1; lo < hi; ++k) {
    const int64_t rest = hi - lo;
    int64_t length = std::min(quarter, std::max(min_piece, rest / 2));
    // The last piece a thread may have, or one that would leave less than the grain, is the rest.
    if (k == per_thread || rest - length < min_piece) length = rest;
    starts[pieces++] = lo;
    lo += length;
  }
  return pieces;
}

// The first element of share t when [begin, end) is split into `threads` shares of q or q + 1
// elements, the first ones longer (a static split).
int64_t share_begin(int64_t begin, int64_t end, int threads, int64_t t) {
  const int64_t q = (end - begin) / threads, r = (end - begin) % threads;
  return begin + t * q + std::min(t, r);
}

}  // namespace

int64_t cut_shares(int64_t begin, int64_t end, int threads, int64_t per_thread, int64_t min_piece,
                   int64_t* cuts, PieceRun* runs) {
  int64_t pieces = 0;
  for (int t = 0; t < threads; ++t) {
    const int64_t first = pieces;
    const int64_t lo = share_begin(begin, end, threads, t);
    pieces += cut_share(lo, share_begin(begin, end, threads, t + 1), per_thread, min_piece,
                        cuts + pieces);
    set_piece_run(runs[t], first, pieces);
  }
  cuts[pieces] = end;
  return pieces;
}

int64_t cut_two_parts(int64_t heavy, int64_t light, int threads, int64_t per_thread,
                      int64_t light_grain, int64_t* begins, int64_t* ends, PieceRun* runs) {
  const int light_threads =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, light / light_grain)));
  int64_t pieces = 0;
  for (int t = 0; t < threads; ++t) {
    const int64_t first = pieces;
    for (int64_t i = share_begin(0, heavy, threads, t); i < share_begin(0, heavy, threads, t + 1);
         ++i, ++pieces) {
      begins[pieces] = i;
      ends[pieces] = i + 1;
    }
    // The light share in equal pieces: as many as per_thread allows, none under the grain. The
    // light elements are shared by as many threads as they have grains, as parallel_for's are;
    // the other threads' light shares are empty.
    const int64_t lo = share_begin(0, light, light_threads, std::min(t, light_threads));
    const int64_t hi = share_begin(0, light, light_threads, std::min(t + 1, light_threads));
    const int64_t count = std::min(per_thread, std::max<int64_t>(1, (hi - lo) / light_grain));
    for (int64_t k = 0; k < count && lo < hi; ++k, ++pieces) {
      begins[pieces] = heavy + share_begin(lo, hi, static_cast<int>(count), k);
      ends[pieces] = heavy + share_begin(lo, hi, static_cast<int>(count), k + 1);
    }
    set_piece_run(runs[t], first, pieces);
  }
  return pieces;
}

}  // namespace detail

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

}  // namespace ember
