// Intra-op threads (tensor/parallel.h): set_num_threads, parallel_for, and Note [Deterministic
// parallel kernels] -- every threaded kernel gives the same bits at 1, 2, 3 and 4 threads -- and
// the CPU capability level the kernels were chosen for (tensor/cpu/capability.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tensor/cpu/capability.h"
#include "tensor/nn_ops.h"
#include "tensor/parallel.h"
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

// Restores the thread count a test changed.
class ParallelTest : public ::testing::Test {
 protected:
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = get_num_threads();
};

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

// Runs `compute` at 1..4 threads; every output must match the 1-thread outputs bit for bit.
void expect_thread_count_invariant(const std::function<std::vector<Tensor>()>& compute) {
  set_num_threads(1);
  const std::vector<Tensor> reference = compute();
  for (int threads : {2, 3, 4}) {
    set_num_threads(threads);
    const std::vector<Tensor> got = compute();
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(same_bits(got[i], reference[i]))
          << "output " << i << " differs at " << threads << " threads: max |diff| = "
          << (got[i].to(kFloat64) - reference[i].to(kFloat64)).abs().max().item<double>();
    }
  }
}

TEST_F(ParallelTest, SetNumThreadsRejectsNonPositive) {
  EXPECT_EMBER_ERROR(set_num_threads(0), "set_num_threads: expected a positive number of threads, got 0");
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
}

TEST_F(ParallelTest, ParallelForCoversTheRangeOnceInOrderedChunks) {
  set_num_threads(4);
  std::vector<std::atomic<int>> hits(100003);
  parallel_for(0, static_cast<int64_t>(hits.size()), 1000, [&](int64_t b, int64_t e) {
    EXPECT_LT(b, e);
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

// Note [Balanced parallel_for]: the calling thread sleeps in each piece it runs, so the other
// thread finishes its own run and then takes the caller's remaining pieces from the back. A static
// split would leave the caller exactly half of the range.
TEST_F(ParallelTest, ParallelForGivesASlowThreadsPiecesToTheOthers) {
  set_num_threads(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> by_caller{0};
  std::vector<std::atomic<int>> hits(64);
  parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
    if (std::this_thread::get_id() == caller) {
      by_caller += e - b;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  // Its first piece, a quarter of its share, and no more.
  EXPECT_LE(by_caller.load(), 8) << "the caller ran " << by_caller.load() << " of 64 elements";
}

// Note [Balanced parallel_for]: each thread's share is where a static split puts it, cut into at
// most per_thread pieces that never grow towards the back, the first a quarter of the share at
// most, none under the grain unless the share is.
TEST_F(ParallelTest, SharesAreCutIntoPiecesThatShrinkTowardsTheBack) {
  struct Case { int64_t begin, end; int threads; int64_t per_thread, min_piece; };
  for (const Case& c : {Case{0, 64, 2, 8, 1}, Case{5, 100008, 3, 8, 1000}, Case{0, 7, 2, 8, 3},
                        Case{0, 101, 2, 1, 1}, Case{0, 1 << 20, 4, 8, 1}, Case{0, 33, 4, 8, 1}}) {
    SCOPED_TRACE(::testing::Message() << "[" << c.begin << ", " << c.end << ") threads "
                                      << c.threads << " per_thread " << c.per_thread << " grain "
                                      << c.min_piece);
    std::vector<int64_t> cuts(c.threads * c.per_thread + 1, -1);
    std::vector<detail::PieceRun> runs(c.threads);
    const int64_t pieces = detail::cut_shares(c.begin, c.end, c.threads, c.per_thread,
                                              c.min_piece, cuts.data(), runs.data());
    ASSERT_EQ(cuts[pieces], c.end);
    int64_t next_piece = 0;
    for (int t = 0; t < c.threads; ++t) {
      // Shares as a static split's: the first (end - begin) % threads one element longer.
      const int64_t q = (c.end - c.begin) / c.threads, r = (c.end - c.begin) % c.threads;
      const int64_t lo = c.begin + t * q + std::min<int64_t>(t, r);
      const int64_t hi = lo + q + (t < r ? 1 : 0);
      std::vector<int64_t> lengths;
      int64_t p;
      while (detail::take_piece(runs[t], /*from_back=*/false, &p)) {
        ASSERT_EQ(p, next_piece++);
        lengths.push_back(cuts[p + 1] - cuts[p]);
      }
      ASSERT_FALSE(lengths.empty());
      EXPECT_EQ(cuts[p + 1 - static_cast<int64_t>(lengths.size())], lo) << "thread " << t;
      EXPECT_EQ(cuts[p + 1], hi) << "thread " << t;
      EXPECT_LE(static_cast<int64_t>(lengths.size()), c.per_thread) << "thread " << t;
      if (c.per_thread > 1 && hi - lo >= 4 * c.min_piece) {
        EXPECT_LE(lengths.front(), (hi - lo + 3) / 4) << "thread " << t;
      }
      for (size_t i = 0; i < lengths.size(); ++i) {
        EXPECT_GE(lengths[i], std::min(c.min_piece, hi - lo)) << "thread " << t << " piece " << i;
        if (i > 0 && i + 1 < lengths.size()) {
          EXPECT_LE(lengths[i], lengths[i - 1]) << "thread " << t << " piece " << i;
        }
      }
    }
    EXPECT_EQ(next_piece, pieces);
  }
  // 32 elements a thread, grain 1: a quarter three times, then halves down to single elements.
  std::vector<int64_t> cuts(17);
  std::vector<detail::PieceRun> runs(2);
  ASSERT_EQ(detail::cut_shares(0, 64, 2, 8, 1, cuts.data(), runs.data()), 14);
  EXPECT_EQ(std::vector<int64_t>(cuts.begin(), cuts.begin() + 8),
            (std::vector<int64_t>{0, 8, 16, 24, 28, 30, 31, 32}));
}

// Note [Two-part regions]: thread t's run is its static share of the heavy items, one piece each,
// then its static share of the light elements in equal pieces (at most per_thread, none under the
// grain unless the share is), numbered after the heavy items.
TEST_F(ParallelTest, TwoPartRunsHoldHeavyItemsThenEqualLightPieces) {
  struct Case { int64_t heavy, light; int threads; int64_t per_thread, grain; };
  for (const Case& c : {Case{16, 64, 2, 32, 1}, Case{16, 64, 2, 32, 4}, Case{3, 7, 4, 32, 1},
                        Case{0, 100, 3, 8, 1}, Case{5, 0, 2, 32, 1}, Case{2, 6, 2, 32, 4}}) {
    SCOPED_TRACE(::testing::Message() << "heavy " << c.heavy << " light " << c.light << " threads "
                                      << c.threads << " per_thread " << c.per_thread << " grain "
                                      << c.grain);
    const int64_t room = c.heavy + c.threads * c.per_thread;
    std::vector<int64_t> begins(room, -1), ends(room, -1);
    std::vector<detail::PieceRun> runs(c.threads);
    const int64_t pieces = detail::cut_two_parts(c.heavy, c.light, c.threads, c.per_thread,
                                                 c.grain, begins.data(), ends.data(), runs.data());
    // Heavy items are shared by every thread; light ones by as many as they have grains.
    const auto share_of = [](int64_t n, int64_t parts, int64_t k) {
      return k >= parts ? n : k * (n / parts) + std::min<int64_t>(k, n % parts);
    };
    const int64_t light_threads =
        std::max<int64_t>(1, std::min<int64_t>(c.threads, c.light / c.grain));
    const auto heavy_share = [&](int64_t k) { return share_of(c.heavy, c.threads, k); };
    const auto light_share_begin = [&](int64_t k) { return share_of(c.light, light_threads, k); };
    std::vector<int> covered(c.heavy + c.light, 0);
    int64_t next_piece = 0;
    for (int t = 0; t < c.threads; ++t) {
      std::vector<int64_t> heavy_items, light_lengths;
      int64_t p;
      while (detail::take_piece(runs[t], /*from_back=*/false, &p)) {
        ASSERT_EQ(p, next_piece++);
        for (int64_t i = begins[p]; i < ends[p]; ++i) covered[i]++;
        if (begins[p] < c.heavy) {
          ASSERT_EQ(ends[p], begins[p] + 1) << "thread " << t << ": a heavy piece is one item";
          ASSERT_TRUE(light_lengths.empty()) << "thread " << t << ": heavy items come first";
          heavy_items.push_back(begins[p]);
        } else {
          light_lengths.push_back(ends[p] - begins[p]);
          EXPECT_EQ(begins[p], c.heavy + light_share_begin(t) +
                                   std::accumulate(light_lengths.begin(), light_lengths.end() - 1,
                                                   int64_t{0}))
              << "thread " << t << ": its light pieces are its share, in order";
        }
      }
      std::vector<int64_t> expected_heavy;
      for (int64_t i = heavy_share(t); i < heavy_share(t + 1); ++i) expected_heavy.push_back(i);
      EXPECT_EQ(heavy_items, expected_heavy) << "thread " << t;
      const int64_t light_share = light_share_begin(t + 1) - light_share_begin(t);
      EXPECT_EQ(std::accumulate(light_lengths.begin(), light_lengths.end(), int64_t{0}),
                light_share);
      EXPECT_LE(static_cast<int64_t>(light_lengths.size()), c.per_thread) << "thread " << t;
      if (!light_lengths.empty()) {
        const auto [shortest, longest] =
            std::minmax_element(light_lengths.begin(), light_lengths.end());
        EXPECT_LE(*longest - *shortest, 1) << "thread " << t << ": light pieces are equal";
        EXPECT_GE(*shortest, std::min(c.grain, c.light)) << "thread " << t;
      }
    }
    EXPECT_EQ(next_piece, pieces);
    for (size_t i = 0; i < covered.size(); ++i) EXPECT_EQ(covered[i], 1) << "element " << i;
  }
}

// Every heavy item once and every light element once, at any thread count; inline at 1 thread.
TEST_F(ParallelTest, ParallelForTwoPartsRunsEveryItemOnce) {
  struct Case { int64_t heavy, light, grain; };
  for (int threads : {1, 2, 3, 4}) {
    set_num_threads(threads);
    for (const Case& c : {Case{16, 64, 1}, Case{16, 64, 4}, Case{0, 10, 1}, Case{5, 0, 1},
                          Case{3, 7, 4}, Case{1, 1, 1}}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, heavy " << c.heavy << " light "
                                        << c.light << " grain " << c.grain);
      std::vector<std::atomic<int>> heavy_hits(c.heavy), light_hits(c.light);
      std::atomic<int> light_calls{0}, short_calls{0};
      parallel_for_two_parts(
          c.heavy, [&](int64_t i) { heavy_hits[i]++; }, c.light, c.grain,
          [&](int64_t b, int64_t e) {
            light_calls++;
            if (e - b < std::min(c.grain, c.light)) short_calls++;
            for (int64_t i = b; i < e; ++i) light_hits[i]++;
          });
      for (int64_t i = 0; i < c.heavy; ++i) EXPECT_EQ(heavy_hits[i].load(), 1) << "heavy " << i;
      for (int64_t i = 0; i < c.light; ++i) EXPECT_EQ(light_hits[i].load(), 1) << "light " << i;
      EXPECT_EQ(short_calls.load(), 0) << "a light chunk under the grain";
      if (threads == 1) {
        EXPECT_EQ(light_calls.load(), c.light > 0 ? 1 : 0);
      }
    }
  }
}

// A thread held up in a heavy item leaves its light share to the others: the region ends on
// light pieces, not on a second heavy item.
TEST_F(ParallelTest, TwoPartRegionGivesAHeldUpThreadsLightShareToTheOthers) {
  set_num_threads(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> light_by_caller{0};
  std::atomic<bool> others_ran{false};
  parallel_for_two_parts(
      2,
      [&](int64_t i) {
        if (std::this_thread::get_id() == caller && i == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      },
      64, 1,
      [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() == caller) {
          light_by_caller += e - b;
        } else {
          others_ran = true;
        }
      });
  // OpenMP may start fewer threads than asked; then the caller runs everything.
  if (others_ran) {
    EXPECT_LE(light_by_caller.load(), 1) << "the caller ran " << light_by_caller.load()
                                         << " of 64 light elements after 50 ms in a heavy item";
  }
}

// parallel_for_static calls f once per thread's share, whichever thread runs it.
TEST_F(ParallelTest, ParallelForStaticCallsOncePerShare) {
  set_num_threads(2);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> calls;
  parallel_for_static(0, 101, 1, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.emplace_back(b, e);
  });
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{0, 51}, {51, 101}}));
}

TEST_F(ParallelTest, ExceptionsInsideParallelForReachTheCaller) {
  set_num_threads(4);
  EXPECT_EMBER_ERROR(parallel_for(0, 1 << 20, 1, [](int64_t b, int64_t) {
                     if (b > 0) EMBER_THROW("kernel failed in chunk at ", b);
                   }),
                   "kernel failed in chunk at");
}

TEST_F(ParallelTest, Conv2dForwardAndBackwardAreThreadCountInvariant) {
  Generator gen(1);
  // 3x3 stride 1 (Winograd), 3x3 stride 2 (im2col + col2im), 1x1, grouped; batch 17 spans
  // three weight-gradient chunks of 8 with a partial last one.
  // A 7x7 map runs Winograd's input gradient several images per call (its light grain, Note
  // [Two-part regions]); float64 takes the generic kernels.
  struct Case { int64_t c, o, k, stride, pad, groups, side = 14; ScalarType dtype = kFloat32; };
  for (const Case& cs : {Case{16, 16, 3, 1, 1, 1}, Case{8, 16, 3, 2, 1, 1}, Case{16, 32, 1, 1, 0, 1},
                         Case{8, 8, 3, 1, 1, 2}, Case{16, 16, 3, 1, 1, 1, 7},
                         Case{8, 8, 3, 1, 1, 1, 14, kFloat64}}) {
    SCOPED_TRACE(::testing::Message() << "C=" << cs.c << " O=" << cs.o << " k=" << cs.k
                                    << " stride=" << cs.stride << " groups=" << cs.groups
                                    << " side=" << cs.side << " " << dtype_name(cs.dtype));
    Tensor x = randn({17, cs.c, cs.side, cs.side}, &gen).to(cs.dtype);
    Tensor w = randn({cs.o, cs.c / cs.groups, cs.k, cs.k}, &gen).to(cs.dtype);
    Tensor b = randn({cs.o}, &gen).to(cs.dtype);
    Conv2dParams p;
    p.stride = {cs.stride, cs.stride};
    p.padding = {cs.pad, cs.pad};
    p.groups = cs.groups;
    expect_thread_count_invariant([&] {
      Tensor y = conv2d(x, w, b, p);
      auto [gi, gw, gb] = conv2d_backward(y * 0.5, x, w, p, {true, true, true});
      return std::vector<Tensor>{y, gi, gw, gb};
    });
  }
}

TEST_F(ParallelTest, MatmulIsThreadCountInvariant) {
  Generator gen(2);
  // Whole 128-row blocks are multiplied in runs as long as a thread's share (gemm_kernels.cc):
  // 1024 and 1000 rows split differently at each thread count; 129 leaves a 1-row block (GEMV).
  for (auto [n, k, m] : {std::array<int64_t, 3>{300, 200, 170}, {129, 515, 67}, {1024, 64, 8},
                         {1000, 96, 40}}) {
    Tensor a = randn({n, k}, &gen), b = randn({k, m}, &gen);
    Tensor bt = randn({m, k}, &gen).t();  // a column-major operand
    expect_thread_count_invariant([&] {
      return std::vector<Tensor>{matmul(a, b), matmul(a, bt), matmul(a.to(kFloat64), b.to(kFloat64))};
    });
  }
}

TEST_F(ParallelTest, ElementwiseAndConversionsAreThreadCountInvariant) {
  Generator gen(3);
  Tensor a = randn({70, 33, 41}, &gen);
  Tensor row = randn({41}, &gen);
  Tensor strided = randn({41, 33, 70}, &gen).permute({2, 1, 0});  // not contiguous
  expect_thread_count_invariant([&] {
    return std::vector<Tensor>{a + row, a * strided, (a * 0.1).exp(), a.relu(), strided.to(kFloat16),
                               strided.sigmoid(), where(gt(a, 0.0), scalar_tensor(0.0), strided),
                               where(gt(strided, 0.0), a, row)};
  });
}

TEST_F(ParallelTest, BatchNormIsThreadCountInvariant) {
  // One chunk of images, then 4 chunks of 11 images and one of 2 (Note [Batch-norm sums by image
  // chunks]: about 32768 elements a chunk), in float32 and float64.
  for (const Shape& shape : {Shape{17, 12, 9, 11}, Shape{46, 3, 33, 33}}) {
    for (ScalarType dtype : {kFloat32, kFloat64}) {
      Generator gen(4);
      const int64_t C = shape[1];
      Tensor x = (randn(shape, &gen) * 3.0 + 1.0).to(dtype);
      Tensor w = randn({C}, &gen).to(dtype), b = randn({C}, &gen).to(dtype);
      expect_thread_count_invariant([&] {
        Tensor rm = zeros({C}, dtype), rv = ones({C}, dtype);
        auto [y, mean, invstd] = batch_norm_forward(x, w, b, rm, rv, true, 0.1, 1e-5);
        auto [gi, gw, gb] =
            batch_norm_backward(y * 0.3, x, w, mean, invstd, true, {true, true, true});
        return std::vector<Tensor>{y, mean, invstd, rm, rv, gi, gw, gb};
      });
    }
  }
}

TEST_F(ParallelTest, PoolingIsThreadCountInvariant) {
  // Planes split across threads: 5 x 13 planes of 11 x 9 (several planes a piece), and 3 x 4
  // planes of 130 x 127 (a plane a piece); windows overlap (kernel 3, stride 2) and pad.
  for (const Shape& shape : {Shape{5, 13, 11, 9}, Shape{3, 4, 130, 127}}) {
    for (ScalarType dtype : {kFloat32, kFloat64}) {
      Generator gen(5);
      Tensor x = randn(shape, &gen).to(dtype);
      expect_thread_count_invariant([&] {
        auto [mx, idx] = max_pool2d_with_indices(x, {3, 3}, {2, 2}, {1, 1});
        Tensor avg = avg_pool2d(x, {3, 3}, {2, 2}, {1, 1});
        Tensor ada = adaptive_avg_pool2d(x, {3, 4});
        return std::vector<Tensor>{mx, idx, max_pool2d_backward(mx * 0.5, x, idx), avg,
                                   avg_pool2d_backward(avg * 0.5, x, {3, 3}, {2, 2}, {1, 1}), ada,
                                   adaptive_avg_pool2d_backward(ada * 0.5, x)};
      });
    }
  }
}

TEST(CpuCapability, LevelIsSupportedAndNamed) {
  const std::string name = cpu_capability();
  EXPECT_TRUE(name == "default" || name == "avx2" || name == "avx512") << name;
  EXPECT_LE(static_cast<int>(cpu_capability_level()), static_cast<int>(cpu_capability_supported()));
  EXPECT_STREQ(cpu_capability_name(cpu_capability_level()), cpu_capability());
  const std::string extensions = cpu_vector_extensions();
  if (cpu_capability_supported() == CpuCapability::kAvx512) {
    EXPECT_NE(extensions.find("avx512f"), std::string::npos) << extensions;
  }
  if (cpu_capability_supported() >= CpuCapability::kAvx2) {
    EXPECT_NE(extensions.find("avx2"), std::string::npos) << extensions;
  }
}

}  // namespace
}  // namespace ember
