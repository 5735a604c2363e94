// ZeRO's partition of parameters across ranks (distributed/optim/parameter_partition.h), without
// MPI: PyTorch's greedy rule on hand-worked cases, balance, per-dtype tallies, and the errors.
#include "distributed/optim/parameter_partition.h"

#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/factories.h"

namespace ember::distributed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<Tensor> sized(const std::vector<int64_t>& numels, ScalarType dtype = kFloat32) {
  std::vector<Tensor> out;
  for (int64_t n : numels) out.push_back(zeros({n}, dtype));
  return out;
}

// Worked by hand with PyTorch's rule: sorted 5,4,3,2,1; 5->0, 4->1, 3->1 (4 < 5), 2->0 (5 < 7),
// 1->0 (7 = 7, the lower rank wins).
TEST(ParameterPartitionTest, GreedyLargestFirstTiesToLowerRank) {
  const auto p = partition_parameters({sized({1, 5, 3, 4, 2})}, 2);
  EXPECT_THAT(p.per_rank[0], ElementsAre(0, 1, 4));
  EXPECT_THAT(p.per_rank[1], ElementsAre(2, 3));
  EXPECT_THAT(p.owner, ElementsAre(0, 0, 1, 1, 0));
  EXPECT_THAT(p.numel_per_rank, ElementsAre(8, 7));
}

// Equal sizes keep their order (stable sort) and go round-robin.
TEST(ParameterPartitionTest, EqualSizesRoundRobin) {
  const auto p = partition_parameters({sized({3, 3, 3, 3, 3})}, 3);
  EXPECT_THAT(p.owner, ElementsAre(0, 1, 2, 0, 1));
}

// The tally carries across groups, as PyTorch's `sizes` does; per_rank_group splits it per group.
TEST(ParameterPartitionTest, TallyCarriesAcrossGroups) {
  const auto p = partition_parameters({sized({10}), sized({4, 4})}, 2);
  EXPECT_THAT(p.owner, ElementsAre(0, 1, 1));
  EXPECT_THAT(p.per_rank_group[0], ElementsAre(ElementsAre(0), ElementsAre()));
  EXPECT_THAT(p.per_rank_group[1], ElementsAre(ElementsAre(), ElementsAre(1, 2)));
}

// Each dtype is balanced on its own: the float64 tensors are not pushed to the rank that got
// fewer float32 elements.
TEST(ParameterPartitionTest, DtypesAreBalancedSeparately) {
  std::vector<Tensor> params = sized({8, 2});
  for (const Tensor& t : sized({6, 6}, kFloat64)) params.push_back(t);
  const auto p = partition_parameters({params}, 2);
  EXPECT_THAT(p.owner, ElementsAre(0, 1, 0, 1));
}

TEST(ParameterPartitionTest, MoreRanksThanParametersLeavesRanksEmpty) {
  const auto p = partition_parameters({sized({2, 1})}, 4);
  EXPECT_THAT(p.owner, ElementsAre(0, 1));
  EXPECT_TRUE(p.per_rank[2].empty());
  EXPECT_TRUE(p.per_rank[3].empty());
}

// A ResNet-like mix: no rank ends more than the largest tensor above the mean.
TEST(ParameterPartitionTest, BalancedWithinTheLargestTensor) {
  std::vector<int64_t> numels;
  for (int i = 0; i < 60; ++i) numels.push_back(16 + (i * 7919) % 9000);
  for (int world : {2, 3, 4, 7}) {
    const auto p = partition_parameters({sized(numels)}, world);
    const int64_t total = std::accumulate(numels.begin(), numels.end(), int64_t{0});
    const int64_t largest = *std::max_element(numels.begin(), numels.end());
    for (int r = 0; r < world; ++r) {
      EXPECT_LE(p.numel_per_rank[r], total / world + largest) << "world " << world << " rank " << r;
    }
  }
}

TEST(ParameterPartitionTest, RejectsAnEmptyWorld) {
  try {
    partition_parameters({sized({1})}, 0);
    FAIL() << "expected a throw";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("world size must be positive, got 0"));
  }
}

}  // namespace
}  // namespace ember::distributed
