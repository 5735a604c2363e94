// broadcast_coalesced (several buckets, mixed dtypes, any root) and verify_params_across_processes
// (matching models pass; a different count, shape or layout fails with a message naming it).
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

using HelpersTest = MpiTest;

std::vector<Tensor> mixed_tensors(int seed) {
  // Values depend on `seed` (the rank), so a broadcast is visible.
  return {rank_input({5, 3}, kFloat32, seed),  rank_input({7}, kFloat64, seed),
          rank_input({4, 4}, kFloat16, seed),  rank_input({0}, kFloat32, seed),
          rank_input({9}, kInt64, seed),       rank_input({2, 2, 2}, kBFloat16, seed),
          rank_input({33}, kFloat32, seed),    rank_input({1}, kFloat16, seed),
          rank_input({6, 2}, kFloat32, seed).t()};  // non-contiguous
}

TEST_F(HelpersTest, BucketsGroupByDtypeAndRespectTheSize) {
  std::vector<Tensor> tensors = mixed_tensors(0);
  const auto buckets = bucket_tensors_by_size(tensors, 64);
  size_t total = 0;
  for (const auto& b : buckets) {
    int64_t bytes = 0;
    for (size_t i : b) {
      EXPECT_EQ(tensors[i].dtype(), tensors[b[0]].dtype());
      bytes += tensors[i].nbytes();
    }
    if (b.size() > 1) {
      EXPECT_LE(bytes, 64);
    }
    total += b.size();
  }
  EXPECT_EQ(total, tensors.size());
  EXPECT_GE(buckets.size(), 6u);
  EXPECT_EQ(bucket_tensors_by_size(tensors, kDefaultBroadcastBucketBytes).size(), 5u);  // one per dtype
}

TEST_F(HelpersTest, BroadcastCoalescedManyBucketsMixedDtypes) {
  for (int root = 0; root < world_; ++root) {
    for (int64_t bucket : {int64_t{64}, int64_t{200}, kDefaultBroadcastBucketBytes}) {
      std::vector<Tensor> tensors = mixed_tensors(rank_);
      broadcast_coalesced(*pg_, tensors, bucket, root);
      std::vector<Tensor> expected = mixed_tensors(root);
      for (size_t i = 0; i < tensors.size(); ++i) {
        EXPECT_EQ(tensors[i].dtype(), expected[i].dtype());
        EXPECT_TRUE(close_to(tensors[i], expected[i].to(kFloat64)))
            << "tensor " << i << ", root " << root << ", bucket " << bucket;
      }
    }
  }
}

TEST_F(HelpersTest, BroadcastCoalescedLargeBuffers) {
  // 3 x 1.5 MiB with a 2 MiB bucket: three buckets, two in flight.
  std::vector<Tensor> tensors;
  for (int i = 0; i < 3; ++i) tensors.push_back(rank_input({3 << 17}, kFloat32, rank_ + i));
  broadcast_coalesced(*pg_, tensors, 2 << 20, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close_to(tensors[i], rank_input({3 << 17}, kFloat64, i)));
}

TEST_F(HelpersTest, VerifyParamsPassesForIdenticalModels) {
  std::vector<Tensor> params{zeros({4, 3}), zeros({3}), zeros({2, 2}, kFloat64)};
  verify_params_across_processes(*pg_, params);
  verify_params_across_processes(*pg_, {});
}

TEST_F(HelpersTest, VerifyParamsReportsDifferentCount) {
  if (world_ < 2) GTEST_SKIP() << "needs two ranks to differ";
  std::vector<Tensor> params{zeros({4}), zeros({4}), zeros({4})};
  if (rank_ != 1) params.push_back(zeros({2}));
  const std::string msg = error_of([&] { verify_params_across_processes(*pg_, params); });
  if (rank_ == 1) {
    EXPECT_THAT(msg, HasSubstr("rank 1 has 3 parameters, rank 0 has 4"));
  } else {
    EXPECT_THAT(msg, HasSubstr("the parameters on rank(s) 1 do not match rank 0's"));
    EXPECT_THAT(msg, HasSubstr("this is rank " + std::to_string(rank_)));
  }
}

TEST_F(HelpersTest, VerifyParamsReportsDifferentShapeWithName) {
  if (world_ < 2) GTEST_SKIP() << "needs two ranks to differ";
  std::vector<Tensor> params{zeros({8}), zeros({4, 4}), zeros({rank_ == world_ - 1 ? 3 : 4, 4})};
  std::vector<std::string> names{"fc1.bias", "fc1.weight", "fc2.weight"};
  const std::string msg = error_of([&] { verify_params_across_processes(*pg_, params, names); });
  if (rank_ == world_ - 1) {
    EXPECT_THAT(msg, HasSubstr("parameter 2 ('fc2.weight') on rank " + std::to_string(rank_) +
                               " has shape float32[3, 4], but on rank 0 it has shape float32[4, 4]"));
  } else {
    EXPECT_THAT(msg, HasSubstr("do not match rank 0's"));
  }
}

TEST_F(HelpersTest, VerifyParamsReportsDifferentStrides) {
  if (world_ < 2) GTEST_SKIP() << "needs two ranks to differ";
  Tensor p = rank_ == 1 ? zeros({4, 4}).t() : zeros({4, 4});
  const std::string msg = error_of([&] { verify_params_across_processes(*pg_, {p}); });
  if (rank_ == 1) {
    EXPECT_THAT(msg, HasSubstr("parameter 0 on rank 1 has shape [4, 4] with strides [1, 4], but on "
                               "rank 0 its strides are [4, 1]"));
  } else {
    EXPECT_NE(msg, "");
  }
}

}  // namespace
}  // namespace ember::distributed::testing
