// ProcessGroup's argument checks, made once for every backend (Note [One lifecycle for every
// collective]), seen through the fake group: a bad call throws at the call, naming the collective,
// the tensors, and the rank and group, before the backend sees it; a good one reaches the backend.
#include "gtest/gtest.h"
#include "tensor/factories.h"
#include "tests/common/error_matchers.h"
#include "tests/distributed/fake_process_group.h"

namespace ember::distributed::testing {
namespace {

using ember::testing::throws_with;

class CollectiveChecks : public ::testing::Test {
 protected:
  // Rank 1 of a fake group of 3.
  std::shared_ptr<FakeProcessGroup> pg_ = std::make_shared<FakeProcessGroup>(1, 3);
  const std::string where_ = "(rank 1 of 3 in group ";
};

TEST_F(CollectiveChecks, OneTensorPerList) {
  std::vector<Tensor> two{zeros({1}), zeros({1})};
  EXPECT_TRUE(throws_with([&] { pg_->allreduce(two); },
                          {"FakeProcessGroup::allreduce", "exactly one tensor", "got 2", where_}));
  std::vector<Tensor> none;
  EXPECT_TRUE(throws_with([&] { pg_->broadcast(none); }, {"FakeProcessGroup::broadcast", "got 0"}));
  std::vector<Tensor> undefined{Tensor()};
  EXPECT_TRUE(throws_with([&] { pg_->allreduce(undefined); }, {"allreduce", "undefined tensor", where_}));
  EXPECT_EQ(pg_->calls().size(), 0u);
}

TEST_F(CollectiveChecks, RootsAndPeersInRange) {
  std::vector<Tensor> one{zeros({1})};
  BroadcastOptions b;
  b.root_rank = 3;
  EXPECT_TRUE(throws_with([&] { pg_->broadcast(one, b); }, {"broadcast", "root rank 3", "size 3", where_}));
  ReduceOptions r;
  r.root_rank = -1;
  EXPECT_TRUE(throws_with([&] { pg_->reduce(one, r); }, {"reduce", "root rank -1"}));
  EXPECT_TRUE(throws_with([&] { pg_->send(one, 7, 0); }, {"send", "destination rank 7"}));
  EXPECT_TRUE(throws_with([&] { pg_->recv(one, -2, 0); }, {"recv", "source rank -2"}));
}

TEST_F(CollectiveChecks, PerRankListsHaveWorldSizeTensorsOfOneDtype) {
  std::vector<Tensor> in{zeros({2})};
  std::vector<std::vector<Tensor>> short_list{{zeros({2}), zeros({2})}};
  EXPECT_TRUE(throws_with([&] { pg_->allgather(short_list, in); }, {"allgather", "one output list of 3"}));
  std::vector<std::vector<Tensor>> mixed{{zeros({2}), zeros({2}, kFloat64), zeros({2})}};
  EXPECT_TRUE(throws_with([&] { pg_->allgather(mixed, in); }, {"allgather", "dtype mismatch", "float64"}));
  std::vector<std::vector<Tensor>> wrong_mine{{zeros({2}), zeros({3}), zeros({2})}};
  EXPECT_TRUE(throws_with([&] { pg_->allgather(wrong_mine, in); }, {"the output for rank 1 has 3 elements"}));
  std::vector<Tensor> out{zeros({2})};
  std::vector<std::vector<Tensor>> uneven{{zeros({2}), zeros({3}), zeros({2})}};
  EXPECT_TRUE(throws_with([&] { pg_->reduce_scatter(out, uneven); },
                          {"FakeProcessGroup::reduce_scatter", "every input must have 2 elements"}));
}

TEST_F(CollectiveChecks, OnlyTheRootPassesTheGatheredList) {
  std::vector<Tensor> in{zeros({2})};
  std::vector<std::vector<Tensor>> outputs{{zeros({2}), zeros({2}), zeros({2})}};
  GatherOptions g;
  g.root_rank = 0;
  EXPECT_TRUE(throws_with([&] { pg_->gather(outputs, in, g); }, {"gather", "only the root (rank 0)"}));
  ScatterOptions s;
  s.root_rank = 0;
  EXPECT_TRUE(throws_with([&] { pg_->scatter(in, outputs, s); }, {"scatter", "only the root (rank 0)"}));
}

TEST_F(CollectiveChecks, SizesThatFit) {
  Tensor in = zeros({2});
  Tensor out = zeros({5});
  EXPECT_TRUE(throws_with([&] { pg_->allgather_base(out, in); }, {"allgather_base", "world size (3) x input"}));
  Tensor rows = zeros({4, 2});
  Tensor same = zeros({4, 2});
  EXPECT_TRUE(throws_with([&] { pg_->alltoall_base(same, rows, {}, {}); },
                          {"alltoall_base", "not divisible by the world size 3"}));
  EXPECT_TRUE(throws_with([&] { pg_->alltoall_base(same, rows, {1, 1, 2}, {1, 1}); },
                          {"alltoall_base", "input split sizes need 3 entries, got 2"}));
  EXPECT_TRUE(throws_with([&] { pg_->alltoall_base(same, rows, {1, 1, 1}, {1, 1, 2}); },
                          {"output split sizes sum to 3", "has 4 rows"}));
  std::vector<Tensor> mixed{zeros({1}), zeros({1}, kInt64)};
  EXPECT_TRUE(throws_with([&] { pg_->allreduce_coalesced(mixed); },
                          {"allreduce_coalesced", "same dtype and device", "tensor 1 is int64"}));
}

TEST_F(CollectiveChecks, GoodCallsReachTheBackendAndMissingOnesNameIt) {
  std::vector<Tensor> one{ones({2})};
  pg_->allreduce(one)->wait();
  ASSERT_EQ(pg_->calls().size(), 1u);
  EXPECT_EQ(pg_->calls()[0].op, OpType::kAllreduce);
  EXPECT_TRUE(throws_with([&] { pg_->reduce(one); }, {"backend 'fake' does not support reduce"}));
}

}  // namespace
}  // namespace ember::distributed::testing
