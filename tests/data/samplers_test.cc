// SequentialSampler and RandomSampler: order, determinism per (seed, epoch), reshuffling per epoch.
#include "data/samplers.h"

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "data_test_util.h"

namespace ember::data {
namespace {

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  if (static_cast<int64_t>(v.size()) != n) return false;
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] != i) return false;
  }
  return true;
}

TEST(SequentialSampler, YieldsZeroToNMinusOne) {
  SequentialSampler s(5);
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(SequentialSampler(0).indices().empty());
  EXPECT_EMBER_ERROR(SequentialSampler(-1), "SequentialSampler", "-1");
}

TEST(RandomSampler, PermutationDeterminedBySeedAndEpoch) {
  RandomSampler a(100, /*seed=*/42), b(100, /*seed=*/42), c(100, /*seed=*/43);
  const std::vector<int64_t> first = a.indices();
  EXPECT_TRUE(is_permutation_of_range(first, 100));
  EXPECT_EQ(first, b.indices());
  EXPECT_NE(first, c.indices());
  std::vector<int64_t> sorted(100);
  std::iota(sorted.begin(), sorted.end(), 0);
  EXPECT_NE(first, sorted);
}

TEST(RandomSampler, ReshufflesEachEpochAndSetEpochReplays) {
  RandomSampler s(50, 7);
  const std::vector<int64_t> e0 = s.indices();
  EXPECT_EQ(s.epoch(), 1);  // advanced by indices()
  const std::vector<int64_t> e1 = s.indices();
  EXPECT_TRUE(is_permutation_of_range(e1, 50));
  EXPECT_NE(e0, e1);
  s.set_epoch(0);
  EXPECT_EQ(s.indices(), e0);
  s.set_epoch(1);
  EXPECT_EQ(s.indices(), e1);
  // Its order for epoch e is seeded_permutation(n, seed + e), the same rule DistributedSampler uses.
  EXPECT_EQ(e1, seeded_permutation(50, 8));
}

TEST(RandomSampler, EmptyAndErrors) {
  EXPECT_TRUE(RandomSampler(0).indices().empty());
  EXPECT_EMBER_ERROR(RandomSampler(-3), "RandomSampler", "-3");
}

}  // namespace
}  // namespace ember::data
