// Intra-op parallelism through OpenMP (GCC's libgomp), as PyTorch's ATen/ParallelOpenMP.h.
// set_num_threads(n) sets the threads every parallel kernel uses; kernels split work with
// parallel_for (or, for two independent jobs of different grain, parallel_for_two_parts).
// Note [Deterministic parallel kernels]: a kernel's result never depends on the
// number of threads, nor on how parallel_for cuts the range or which thread runs a chunk. Work is
// split only where elements are independent (an image, an output channel, a run of elements); sums
// over a split dimension use fixed-size chunks whose partial results are combined in chunk order,
// so 1 and 16 threads give the same bits.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <typeinfo>

#include "tensor/parallel_profile.h"

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

namespace detail {

// Note [Balanced parallel_for]
// A static split (one equal run per thread, as ATen's OpenMP parallel_for does) makes every
// region wait for its slowest thread, and threads are not equally fast (a CPU whose core other
// tenants share runs the same loop slower than one alone), so a static split's speed-up is capped
// at threads x slowest / fastest however well the kernels scale (`bench/resnet_bench.sh` times one
// thread on each CPU; docs/measurements.md, "Threads").
// parallel_for therefore gives thread t the share a static split would (the data it wrote in the
// previous op stays its own) and cuts each share into pieces -- at most kPiecesPerThread, none
// under the grain -- that shrink towards the back: three of a quarter of the share, then each half
// of what is left, down to the grain. A thread takes its own pieces front to back; once they are
// gone it takes the others' from the back, one at a time, so a slow thread's last pieces go to a
// fast one, and the pieces that end a region, whoever runs them, are its shortest: the threads
// finish closer together. (With equal pieces a thread idled about half a piece at the end of each
// region: the Winograd forward's 64 images in 16 pieces of 4 left 3.6 ms of thread time a 2-thread
// ResNet-20 step idle, 1.7 ms with these; Note [Parallel profile].)
// No piece is above a quarter of a share, so a thread descheduled inside one holds back little.
// Piece bounds depend only on the range, the grain and the thread count; which thread runs a piece
// depends on timing, which kernels may ignore because every element's value is computed within
// one call of f however the range is cut (Note [Deterministic parallel kernels]).
constexpr int64_t kPiecesPerThread = 8;

// One thread's run of pieces [front, back), packed in one word: its owner takes the front and
// thieves take the back, each with one compare-and-swap.
struct alignas(64) PieceRun {
  std::atomic<uint64_t> bounds{0};
};
void set_piece_run(PieceRun& run, int64_t front, int64_t back);
// Takes the run's first piece (its owner) or its last (a thief); false once the run is empty.
bool take_piece(PieceRun& run, bool from_back, int64_t* piece);
// Cuts [begin, end) into `threads` equal shares and each share into at most `per_thread` pieces
// that shrink towards its back, none under `min_piece` elements unless the share is (Note
// [Balanced parallel_for]). Writes the pieces' first elements, then `end`, to cuts (room for
// threads x per_thread + 1) and thread t's run of pieces to runs[t]; returns the number of pieces.
int64_t cut_shares(int64_t begin, int64_t end, int threads, int64_t per_thread, int64_t min_piece,
                   int64_t* cuts, PieceRun* runs);
// Note [Two-part regions]: pieces for `heavy` items [0, heavy) and `light` elements, numbered
// heavy + [0, light). Thread t's run is its static share of the heavy items, one piece each, then
// its static share of the light elements in equal pieces, at most per_thread and none under
// light_grain (the light elements are shared by at most light / light_grain threads). Writes
// piece p's bounds to begins[p] and ends[p] (room for heavy + threads x per_thread pieces) and the
// runs to runs[t]; returns the number of pieces.
int64_t cut_two_parts(int64_t heavy, int64_t light, int threads, int64_t per_thread,
                      int64_t light_grain, int64_t* begins, int64_t* ends, PieceRun* runs);

// Runs every piece of `runs` on `threads` threads (piece p is [begins[p], ends[p])): a thread
// takes its own run front to back, then the other runs from the back. `site` names the call site
// in the profile.
template <typename F>
void run_runs(int threads, PieceRun* runs, const int64_t* begins, const int64_t* ends, const F& f,
              const std::type_info& site) {
#ifdef _OPENMP
  // An exception may not leave an OpenMP region: the first one is kept and rethrown here.
  std::exception_ptr error;
  std::mutex error_mutex;
  RegionProfile profile(threads);  // Note [Parallel profile]
#pragma omp parallel num_threads(threads)
  {
    // OpenMP may start fewer threads than asked; the runs of those missing are taken as thefts.
    const int t = omp_get_thread_num();
    profile.thread_began(t);
    try {
      int64_t p;
      while (take_piece(runs[t], /*from_back=*/false, &p)) f(begins[p], ends[p]);
      for (int k = 1; k < threads; ++k) {
        PieceRun& victim = runs[(t + k) % threads];
        while (take_piece(victim, /*from_back=*/true, &p)) f(begins[p], ends[p]);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
    profile.thread_finished(t);
  }
  profile.record(site);
  if (error) std::rethrow_exception(error);
#else
  (void)site;
  int64_t p;
  for (int t = 0; t < threads; ++t) {
    while (take_piece(runs[t], /*from_back=*/false, &p)) f(begins[p], ends[p]);
  }
#endif
}

// f over [begin, end) on `threads` threads, in pieces cut by cut_shares.
template <typename F>
void run_pieces(int64_t begin, int64_t end, int threads, int64_t per_thread, int64_t min_piece,
                const F& f) {
#ifdef _OPENMP
  std::unique_ptr<PieceRun[]> runs(new PieceRun[threads]);
  std::unique_ptr<int64_t[]> cuts(new int64_t[threads * per_thread + 1]);
  cut_shares(begin, end, threads, per_thread, min_piece, cuts.get(), runs.get());
  run_runs(threads, runs.get(), cuts.get(), cuts.get() + 1, f, typeid(F));
#else
  (void)threads;
  (void)per_thread;
  (void)min_piece;
  f(begin, end);
#endif
}

// f over [begin, end) in at most `per_thread` pieces a thread, none under `grain` elements (a
// share may be smaller): inline when that leaves one thread, or inside a parallel region.
template <typename F>
void split(int64_t begin, int64_t end, int64_t grain, int64_t per_thread, const F& f) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  const int64_t max_pieces = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int threads = static_cast<int>(std::min<int64_t>(get_num_threads(), max_pieces));
  if (threads == 1 || n <= grain || in_parallel_region()) {
    f(begin, end);
    return;
  }
  run_pieces(begin, end, threads, per_thread, std::max<int64_t>(grain, 1), f);
}

}  // namespace detail

// Calls f(begin, end) on disjoint contiguous chunks covering [begin, end), in parallel when the
// range is larger than `grain` and more than one thread is set; chunks hold at least `grain`
// elements (but the whole range may be smaller), and a thread may run several. Load-balanced:
// Note [Balanced parallel_for].
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  detail::split(begin, end, grain, detail::kPiecesPerThread, f);
}

// The grain for parallel_for over rows of `row_elements` elements each (image planes, channel
// rows): about 16K elements a chunk, at least one row.
inline int64_t rows_grain(int64_t row_elements) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_elements, 1));
}
// parallel_for with one chunk per thread, for kernels whose cost grows with the number of calls
// (a GEMM packs its right operand once per call): a thread that finishes early can only take a
// chunk no other thread has started.
template <typename F>
void parallel_for_static(int64_t begin, int64_t end, int64_t grain, const F& f) {
  detail::split(begin, end, grain, 1, f);
}

// Note [Two-part regions]
// A convolution's backward computes two independent things over the batch: the weight gradient
// in fixed chunks of images (coarse: the chunk is the unit of its deterministic sum, Note
// [Deterministic parallel kernels]) and the input gradient image by image (fine). In a region of
// its own the weight gradient ends, on average, half a chunk after its first thread runs out of
// chunks (1.7-3.1 ms of thread time idle a 2-thread ResNet-20 step, Note [Parallel profile]).
// parallel_for_two_parts runs both in one region: each thread's run holds its share of the heavy
// items, one piece each, then its share of the light elements in small equal pieces; a thief
// takes from the back of a run, light pieces first, so the region ends on a light piece.
// The light pieces are equal, not shrinking as parallel_for's: a thread that is behind after the
// heavy part can be behind by more than its short back pieces, which the thief then takes, and it
// would end on one of its long front ones (measured on ResNet-20's backward: first and last thread
// finished 185 us apart a region with light pieces of 8,8,8,4,2,1,1 images, 32-46 us with pieces
// of one). Which thread runs an item does not change its value.
namespace detail {
constexpr int64_t kLightPiecesPerThread = 32;
}  // namespace detail

// heavy(i) for every i in [0, heavy_count) and light(begin, end) over disjoint chunks covering
// [0, light_count), none under light_grain elements (unless light_count is smaller): in one
// parallel region, or inline (heavy items first) when one thread is set or inside a region.
template <typename H, typename L>
void parallel_for_two_parts(int64_t heavy_count, const H& heavy, int64_t light_count,
                            int64_t light_grain, const L& light) {
  light_grain = std::max<int64_t>(light_grain, 1);
  const int64_t items = heavy_count + std::max<int64_t>(1, light_count / light_grain);
  const int threads = static_cast<int>(std::min<int64_t>(get_num_threads(), items));
  if (threads == 1 || in_parallel_region()) {
    for (int64_t i = 0; i < heavy_count; ++i) heavy(i);
    if (light_count > 0) light(int64_t{0}, light_count);
    return;
  }
  const int64_t room = heavy_count + threads * detail::kLightPiecesPerThread;
  std::unique_ptr<detail::PieceRun[]> runs(new detail::PieceRun[threads]);
  std::unique_ptr<int64_t[]> bounds(new int64_t[2 * room]);
  detail::cut_two_parts(heavy_count, light_count, threads, detail::kLightPiecesPerThread,
                        light_grain, bounds.get(), bounds.get() + room, runs.get());
  detail::run_runs(
      threads, runs.get(), bounds.get(), bounds.get() + room,
      [&](int64_t begin, int64_t end) {
        if (begin < heavy_count) {
          for (int64_t i = begin; i < end; ++i) heavy(i);
        } else {
          light(begin - heavy_count, end - heavy_count);
        }
      },
      typeid(H));
}

}  // namespace ember
