// What happens when ranks disagree: a collective one rank skips times out on the others (the
// watchdog), a mismatched collective under DETAIL is reported with what each rank called, and errors
// raised in collectives or callbacks reach the caller through Work and Future.
#include "distributed/process_group_wrapper.h"
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

std::vector<int> all_ranks(int world) {
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  return ranks;
}

class FailureTest : public MpiTest {
 protected:
  // A private group over every rank, so a broken or desynchronised group never touches the world's.
  ProcessGroupPtr make_group(std::chrono::milliseconds timeout, bool detail) {
    ProcessGroup::Options options = pg_->options();
    options.timeout = timeout;
    options.has_debug_level = detail;
    options.debug_level = DebugLevel::kDetail;
    options.group_name = detail ? "detail_group" : "timeout_group";
    return pg_->new_subgroup(all_ranks(world_), options);
  }
};

TEST_F(FailureTest, SkippedCollectiveTimesOutOnTheOtherRanks) {
  if (world_ < 2) GTEST_SKIP() << "needs a peer to skip the collective";
  ProcessGroupPtr group = make_group(std::chrono::milliseconds(500), false);
  if (rank_ != 0) {
    // Rank 0 never joins: without the watchdog this would hang forever.
    Tensor t = ones({8});
    std::vector<Tensor> list{t};
    WorkPtr work = group->allreduce(list);
    const auto start = std::chrono::steady_clock::now();
    const std::string msg = error_of([&] { work->wait(); });
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_THAT(msg, HasSubstr("allreduce #0"));
    EXPECT_THAT(msg, HasSubstr("timed out after 500 ms"));
    EXPECT_THAT(msg, HasSubstr("rank " + std::to_string(rank_) + " of " + std::to_string(world_)));
    EXPECT_THAT(msg, HasSubstr("timeout_group"));
    EXPECT_LT(waited, std::chrono::seconds(30));
    EXPECT_FALSE(work->is_success());
    // The group is now unusable, and says so at once instead of timing out again.
    std::vector<Tensor> again{ones({2})};
    EXPECT_THAT(error_of([&] { group->allreduce(again)->wait(); }),
                HasSubstr("unusable: allreduce #0"));
    EXPECT_NE(group->broken_reason(), "");
  }
  // Everyone, rank 0 included, carries on in the world group.
  Tensor w = ones({3});
  std::vector<Tensor> list{w};
  pg_->allreduce(list)->wait();
  EXPECT_TRUE(close_to(w, full({3}, Scalar(static_cast<double>(world_)), kFloat64)));
}

TEST_F(FailureTest, PerCallTimeoutOverridesTheGroups) {
  if (world_ < 2) GTEST_SKIP() << "needs a peer to skip the collective";
  ProcessGroupPtr group = make_group(std::chrono::minutes(5), false);
  if (rank_ == world_ - 1) {
    std::vector<Tensor> list{ones({1})};
    BroadcastOptions opts;
    opts.timeout = std::chrono::milliseconds(300);
    EXPECT_THAT(error_of([&] { group->broadcast(list, opts)->wait(); }),
                HasSubstr("timed out after 300 ms"));
  }
}

TEST_F(FailureTest, DetailReportsMismatchedCollectives) {
  if (world_ < 2) GTEST_SKIP() << "needs two ranks to disagree";
  ProcessGroupPtr group = make_group(std::chrono::seconds(60), true);
  Tensor t = ones({4});
  std::vector<Tensor> list{t};
  // Rank 0 broadcasts while everyone else allreduces: a classic desynchronised program.
  WorkPtr work = rank_ == 0 ? group->broadcast(list) : group->allreduce(list);
  const std::string msg = error_of([&] { work->wait(); });
  EXPECT_THAT(msg, HasSubstr("collective mismatch in process group detail_group"));
  EXPECT_THAT(msg, HasSubstr("detected on rank " + std::to_string(rank_)));
  EXPECT_THAT(msg, HasSubstr("rank 0 called broadcast #1 (root 0, float32 [4]"));
  EXPECT_THAT(msg, HasSubstr("rank 1 called allreduce #1 (SUM, float32 [4]"));
  // No payload moved, and the group stays usable: the check is itself a completed collective.
  EXPECT_TRUE(close_to(t, full({4}, Scalar(1.0), kFloat64)));
  group->allreduce(list)->wait();
  EXPECT_TRUE(close_to(t, full({4}, Scalar(static_cast<double>(world_)), kFloat64)));
}

TEST_F(FailureTest, DetailReportsMismatchedSizes) {
  ProcessGroupPtr group = make_group(std::chrono::seconds(60), true);
  EXPECT_EQ(group->debug_level(), DebugLevel::kDetail);
  // DETAIL puts the check in front of the backend; a group at another level is the backend's own.
  EXPECT_NE(dynamic_cast<ProcessGroupWrapper*>(group.get()), nullptr);
  EXPECT_EQ(group->backend_name(), "mpi");
  EXPECT_EQ(dynamic_cast<ProcessGroupWrapper*>(make_group(std::chrono::seconds(60), false).get()), nullptr);
  // Matching calls pass the check at every world size.
  std::vector<Tensor> same{ones({2, 3})};
  group->allreduce(same)->wait();
  if (world_ < 2) return;
  std::vector<Tensor> list{ones({rank_ == 1 ? 5 : 4}, kFloat64)};
  const std::string msg = error_of([&] { group->allreduce(list)->wait(); });
  EXPECT_THAT(msg, HasSubstr("rank 1 called allreduce #3 (SUM, float64 [5]"));
  EXPECT_THAT(msg, HasSubstr("rank 0 called allreduce #3 (SUM, float64 [4]"));
}

TEST_F(FailureTest, FutureThenChainsOnACollective) {
  Tensor t = full({3}, Scalar(2.0), kFloat32);
  std::vector<Tensor> list{t};
  auto future = pg_->allreduce(list)->get_future()->then([this](Future& f) {
    return std::vector<Tensor>{f.value()[0].div(static_cast<double>(world_))};
  });
  EXPECT_TRUE(close_to(future->value()[0], full({3}, Scalar(2.0), kFloat64)));
  EXPECT_TRUE(close_to(t, full({3}, Scalar(2.0 * world_), kFloat64)));
}

TEST_F(FailureTest, CallbackExceptionSurfacesFromWait) {
  std::vector<Tensor> list{ones({2})};
  auto future = pg_->allreduce(list)->get_future()->then(
      [](Future&) -> std::vector<Tensor> { EMBER_THROW("comm hook failed for bucket 0"); });
  EXPECT_THAT(error_of([&] { future->wait(); }), HasSubstr("comm hook failed for bucket 0"));
  // The group is fine: the error was the callback's, not the collective's.
  pg_->barrier()->wait();
}

TEST_F(FailureTest, CollectiveErrorReachesChainedFutures) {
  if (world_ < 2) GTEST_SKIP() << "needs two ranks to disagree";
  ProcessGroupPtr group = make_group(std::chrono::seconds(60), true);
  std::vector<Tensor> list{ones({rank_ + 1})};
  bool callback_ran = false;
  auto future = group->allreduce(list)->get_future()->then([&](Future& f) {
    callback_ran = true;
    return f.value();
  });
  EXPECT_THAT(error_of([&] { future->value(); }), HasSubstr("collective mismatch"));
  EXPECT_FALSE(callback_ran);
}

}  // namespace
}  // namespace ember::distributed::testing
