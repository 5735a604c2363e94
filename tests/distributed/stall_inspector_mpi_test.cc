// The stall inspector under mpirun: ranks that skip a collective on a private short-timeout group
// are named, exactly, in the other ranks' one-line timeout error and in the group's stall_report();
// the ranks that did arrive are named as such. The skipping ranks keep the group (and so their
// side channel) alive until the others have timed out: they meet again in the world group.
#include "distributed/backends/mpi/process_group_mpi.h"
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kTimeout = std::chrono::milliseconds(2000);

class StallInspectorTest : public MpiTest {
 protected:
  ProcessGroupPtr make_group() {
    ProcessGroup::Options options = pg_->options();
    options.timeout = kTimeout;
    options.group_name = "stall_group";
    std::vector<int> ranks(world_);
    for (int r = 0; r < world_; ++r) ranks[r] = r;
    return pg_->new_subgroup(ranks, options);
  }

  // Every rank runs a barrier (#0) on a fresh group, then the ranks not in `skipping` allreduce
  // (#1) while the skipping ones do not. Checks what the others report; returns their message.
  void skip_allreduce(const std::vector<int>& skipping) {
    ProcessGroupPtr group = make_group();
    group->barrier()->wait();
    const bool skips = std::find(skipping.begin(), skipping.end(), rank_) != skipping.end();
    if (!skips) {
      std::vector<Tensor> list{ones({5})};
      const auto start = std::chrono::steady_clock::now();
      const std::string msg = error_of([&] { group->allreduce(list)->wait(); });
      const auto took = std::chrono::steady_clock::now() - start;
      // Timeout plus the inspection's budget, with room for an oversubscribed machine.
      EXPECT_LT(took, kTimeout + std::chrono::seconds(8));
      EXPECT_THAT(msg, HasSubstr("allreduce #1 (SUM, float32 [5], 1 tensor, 5 elements) on rank " +
                                 std::to_string(rank_)));
      EXPECT_THAT(msg, HasSubstr("in group stall_group"));
      EXPECT_THAT(msg, HasSubstr("timed out after 2000 ms (the group's watchdog timeout): " +
                                 rank_list(skipping) + " did not arrive ("));
      for (int r : skipping) {
        EXPECT_THAT(msg, HasSubstr("rank " + std::to_string(r) + " has not arrived: its last collective "
                                   "is barrier #0 (0 tensors, 0 elements), finished"));
      }
      std::vector<int> arrived;
      for (int r = 0; r < world_; ++r) {
        const bool skipped = std::find(skipping.begin(), skipping.end(), r) != skipping.end();
        if (!skipped && r != rank_) arrived.push_back(r);
      }
      if (arrived.empty()) {
        EXPECT_THAT(msg, Not(HasSubstr(" arrived --")));
      } else {
        EXPECT_THAT(msg, HasSubstr("; " + rank_list(arrived) + " arrived -- "));
      }
      EXPECT_THAT(msg, Not(HasSubstr("\n")));
      const StallReport report = group->stall_report();
      EXPECT_EQ(report.not_arrived, skipping);
      EXPECT_EQ(report.arrived, arrived);
      // Later calls say why the group is unusable, naming the ranks again.
      std::vector<Tensor> again{ones({2})};
      EXPECT_THAT(error_of([&] { group->allreduce(again)->wait(); }),
                  HasSubstr("unusable: allreduce #1 (SUM, float32 [5], 1 tensor, 5 elements) timed out "
                            "after 2000 ms (" + rank_list(skipping) + " did not arrive)"));
    } else {
      EXPECT_TRUE(group->stall_report().empty());
    }
    // Everyone meets in the world group; the skipping ranks' side channel lived until then.
    pg_->barrier()->wait();
  }
};

TEST_F(StallInspectorTest, HealthyGroupHasNoReport) {
  ProcessGroupPtr group = make_group();
  std::vector<Tensor> list{ones({3})};
  group->allreduce(list)->wait();
  EXPECT_TRUE(group->stall_report().empty());
}

TEST_F(StallInspectorTest, OneRankSkipsTheCollective) {
  if (world_ < 2) GTEST_SKIP() << "needs a peer to skip the collective";
  skip_allreduce({0});
}

TEST_F(StallInspectorTest, TheLastRankSkipsTheCollective) {
  if (world_ < 2) GTEST_SKIP() << "needs a peer to skip the collective";
  skip_allreduce({world_ - 1});
}

TEST_F(StallInspectorTest, TwoRanksSkipTheCollective) {
  if (world_ < 3) GTEST_SKIP() << "needs a rank that arrives besides the two that skip";
  skip_allreduce({0, world_ - 1});
}

}  // namespace
}  // namespace ember::distributed::testing
