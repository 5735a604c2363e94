// DistributedSampler against PyTorch 1.13's DistributedSampler: the non-shuffled assignments below
// were printed by `list(DistributedSampler(range(n), num_replicas=r, rank=k, shuffle=False,
// drop_last=d))`; the shuffled ones are checked for the same rules on ember's permutation.
#include "data/distributed_sampler.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "data_test_util.h"

namespace ember::data {
namespace {

using Assignment = std::vector<std::vector<int64_t>>;

Assignment all_ranks(int64_t n, int64_t replicas, bool shuffle, bool drop_last, uint64_t seed = 0,
                     int64_t epoch = 0) {
  Assignment out;
  for (int64_t r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
    EXPECT_EQ(static_cast<int64_t>(out.back().size()), s.size());
  }
  return out;
}

struct TorchCase {
  int64_t n, replicas;
  bool drop_last;
  Assignment expected;
};

TEST(DistributedSampler, MatchesPyTorchWithoutShuffle) {
  const std::vector<TorchCase> cases = {
      {10, 3, false, {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}}},
      {10, 3, true, {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}},
      {2, 3, false, {{0}, {1}, {0}}},
      {7, 4, false, {{0, 4}, {1, 5}, {2, 6}, {3, 0}}},
      {7, 4, true, {{0}, {1}, {2}, {3}}},
      {5, 5, false, {{0}, {1}, {2}, {3}, {4}}},
      {2, 5, false, {{0}, {1}, {0}, {1}, {0}}},
      {1, 4, false, {{0}, {0}, {0}, {0}}},
      {3, 8, false, {{0}, {1}, {2}, {0}, {1}, {2}, {0}, {1}}},
      {0, 2, false, {{}, {}}},
      {2, 5, true, {{}, {}, {}, {}, {}}},
  };
  for (const TorchCase& c : cases) {
    EXPECT_EQ(all_ranks(c.n, c.replicas, /*shuffle=*/false, c.drop_last), c.expected)
        << "n=" << c.n << " replicas=" << c.replicas << " drop_last=" << c.drop_last;
  }
}

TEST(DistributedSampler, SizesFollowCeilAndFloor) {
  DistributedSampler pad(10, 4, 0, true, 0, /*drop_last=*/false);
  EXPECT_EQ(pad.num_samples(), 3);
  EXPECT_EQ(pad.total_size(), 12);
  DistributedSampler drop(10, 4, 0, true, 0, /*drop_last=*/true);
  EXPECT_EQ(drop.num_samples(), 2);
  EXPECT_EQ(drop.total_size(), 8);
}

TEST(DistributedSampler, ShuffledRanksCoverTheDatasetOnceWhenDivisible) {
  const Assignment a = all_ranks(12, 4, /*shuffle=*/true, false, /*seed=*/5);
  std::vector<int64_t> merged;
  for (const auto& r : a) merged.insert(merged.end(), r.begin(), r.end());
  std::sort(merged.begin(), merged.end());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(merged[i], i);
}

TEST(DistributedSampler, ShuffledPaddingRepeatsThePermutationsStart) {
  // Interleaving the ranks back gives the padded list: the permutation then its first elements.
  const int64_t n = 10, replicas = 4;
  const Assignment a = all_ranks(n, replicas, true, false, /*seed=*/3, /*epoch=*/2);
  const std::vector<int64_t> perm = seeded_permutation(n, 3 + 2);
  std::vector<int64_t> padded = perm;
  padded.push_back(perm[0]);
  padded.push_back(perm[1]);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(a[i % replicas][i / replicas], padded[i]) << "position " << i;
}

TEST(DistributedSampler, ShuffledDropLastDropsThePermutationsTail) {
  const int64_t n = 11, replicas = 3;
  const Assignment a = all_ranks(n, replicas, true, /*drop_last=*/true, /*seed=*/9);
  const std::vector<int64_t> perm = seeded_permutation(n, 9);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(a[i % replicas][i / replicas], perm[i]);
    seen.insert(perm[i]);
  }
  EXPECT_EQ(seen.size(), 9u);  // no duplicates when dropping
}

TEST(DistributedSampler, SetEpochReshufflesIdenticallyOnEveryRank) {
  DistributedSampler r0(100, 2, 0, true, /*seed=*/1), r1(100, 2, 1, true, /*seed=*/1);
  const std::vector<int64_t> e0 = r0.indices();
  EXPECT_EQ(r0.indices(), e0);  // without set_epoch the order stays (as in PyTorch)
  r0.set_epoch(1);
  r1.set_epoch(1);
  const std::vector<int64_t> a = r0.indices(), b = r1.indices();
  EXPECT_NE(a, e0);
  std::set<int64_t> both(a.begin(), a.end());
  both.insert(b.begin(), b.end());
  EXPECT_EQ(both.size(), 100u);  // same permutation on both ranks: disjoint halves
  r0.set_epoch(0);
  EXPECT_EQ(r0.indices(), e0);
  // seed + epoch: (seed 1, epoch 1) is (seed 2, epoch 0).
  EXPECT_EQ(DistributedSampler(100, 2, 0, true, 2).indices(), a);
}

TEST(DistributedSamplerErrors, BadArguments) {
  EXPECT_EMBER_ERROR(DistributedSampler(10, 3, 3), "DistributedSampler", "invalid rank 3", "[0, 2]");
  EXPECT_EMBER_ERROR(DistributedSampler(10, 3, -1), "invalid rank -1");
  EXPECT_EMBER_ERROR(DistributedSampler(10, 0, 0), "num_replicas must be positive", "0");
  EXPECT_EMBER_ERROR(DistributedSampler(-1, 2, 0), "dataset size", "-1");
}

}  // namespace
}  // namespace ember::data
