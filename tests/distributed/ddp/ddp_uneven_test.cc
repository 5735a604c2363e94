// Ranks running different numbers of iterations without Join must not hang silently: the extra
// iteration's bucket allreduce hits the group's collective timeout and
// finalize_backward reports it naming DistributedDataParallel, the bucket, that inputs look uneven
// and the ranks that stopped (the group's stall inspector found them). ddp_join_test covers
// training under Join. The DDP runs on its own short-timeout group, so only that group breaks (a
// timed-out group refuses later calls); the default group stays healthy for the fixture's TearDown. Separate binary from ddp_errors_test so a
// broken group never shares a process with the other cases.
#include <chrono>
#include <string>

#include "distributed/diagnostics/stall_inspector.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

constexpr auto kGroupTimeout = std::chrono::seconds(3);

class DdpUneven : public MpiTest {
 protected:
  // Trains on a fresh short-timeout group; `extra_rank` runs one iteration more than the others
  // (the model: make_model, or a small MLP without buffers).
  // Returns the error this rank saw ("" when none) and checks how long the loop took.
  using ModelFactory = std::function<std::shared_ptr<nn::Module>(uint64_t)>;
  std::string train_with_extra_iteration_on(int extra_rank, ModelFactory make_model = nullptr) {
    std::vector<int> ranks(world_);
    for (int r = 0; r < world_; ++r) ranks[r] = r;
    DDPOptions options;
    options.process_group = new_group(ranks, std::chrono::milliseconds(kGroupTimeout));
    Generator g(42);
    auto model = make_model ? make_model(42) : nn::make_mlp({4, 8, 2}, &g);
    auto ddp = std::make_shared<DistributedDataParallel>(model, options);
    // Two iterations everywhere (the second forward rebuilds the buckets, a broadcast every rank
    // joins), then one more on `extra_rank` alone.
    const int iterations = rank_ == extra_rank ? 3 : 2;
    const auto start = std::chrono::steady_clock::now();
    std::string msg;
    for (int it = 0; it < iterations && msg.empty(); ++it) {
      msg = error_of([&] { sum(ddp->forward(randn({3, make_model ? 6 : 4}, &g))).backward(); });
    }
    const auto took = std::chrono::steady_clock::now() - start;
    // The timeout fires once; far from the mpi_test wrapper's limit.
    EXPECT_LT(took, kGroupTimeout + std::chrono::seconds(20));
    return msg;
  }
};

void expect_timeout_message(const std::string& msg, int rank, int world) {
  EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(rank) +
                             "): the reduction of bucket 0 of 1 (4 parameters: "));
  EXPECT_THAT(msg, HasSubstr("did not complete"));
  EXPECT_THAT(msg, HasSubstr("timed out after 3000 ms"));
  // Every other rank finished its two iterations: the stall inspector finds each of them after its
  // last collective and the hint names them all, at any world size.
  std::vector<int> others;
  for (int r = 0; r < world; ++r) {
    if (r != rank) others.push_back(r);
  }
  EXPECT_THAT(msg, HasSubstr(rank_list(others) + " did not arrive ("));
  EXPECT_THAT(msg, HasSubstr("Inputs look uneven: this rank is in its iteration 3 but " + rank_list(others) +
                             " stopped before issuing this collective"));
  EXPECT_THAT(msg, HasSubstr("Wrap the training loop in Join"));
  EXPECT_THAT(msg, HasSubstr("every rank must call forward/backward the same number of times"));
}

TEST_F(DdpUneven, ExtraIterationOnRankZeroTimesOutNamingTheBucket) {
  const std::string msg = train_with_extra_iteration_on(0);
  if (rank_ == 0) {
    expect_timeout_message(msg, 0, world_);
  } else {
    EXPECT_EQ(msg, "");  // finished its iterations and left
  }
}

// The same with a non-root rank running ahead: nothing depends on rank 0 being the one.
TEST_F(DdpUneven, ExtraIterationOnLastRankTimesOutNamingTheBucket) {
  const int last = world_ - 1;
  const std::string msg = train_with_extra_iteration_on(last);
  if (rank_ == last) {
    expect_timeout_message(msg, last, world_);
  } else {
    EXPECT_EQ(msg, "");
  }
}

// With buffers (BatchNorm) the extra iteration already fails in forward, at the buffer broadcast.
TEST_F(DdpUneven, ExtraIterationWithBuffersFailsAtTheBufferBroadcast) {
  const int last = world_ - 1;
  const std::string msg = train_with_extra_iteration_on(last, mlp_with_batch_norm);
  if (rank_ == last) {
    EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(last) +
                               "): broadcasting the buffers before forward failed: "));
    EXPECT_THAT(msg, HasSubstr("timed out after 3000 ms"));
    std::vector<int> others;
    for (int r = 0; r < last; ++r) others.push_back(r);
    EXPECT_THAT(msg, HasSubstr("Inputs look uneven: this rank is in its iteration 3 but " + rank_list(others) +
                               " stopped"));
  } else {
    EXPECT_EQ(msg, "");
  }
}

// Join cannot shadow static_graph's first iteration (delay_all_reduce): a rank with no batch at
// all says so, and the others time out instead of hanging.
TEST_F(DdpUneven, JoinWithStaticGraphNeedsOneIterationPerRank) {
  std::vector<int> ranks(world_);
  for (int r = 0; r < world_; ++r) ranks[r] = r;
  DDPOptions options;
  options.process_group = new_group(ranks, std::chrono::milliseconds(kGroupTimeout));
  options.static_graph = true;
  Generator g(42);
  auto ddp = std::make_shared<DistributedDataParallel>(nn::make_mlp({4, 8, 2}, &g), options);
  const int batches = rank_ == 0 ? 0 : 2;
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] {
    Join::run({ddp.get()}, JoinOptions{}, [&] {
      for (int i = 0; i < batches; ++i) sum(ddp->forward(randn({3, 4}, &g))).backward();
    });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, kGroupTimeout + std::chrono::seconds(20));
  if (rank_ == 0) {
    EXPECT_THAT(msg, HasSubstr("Join with static_graph=true needs every rank to train at least one iteration"));
  } else {
    EXPECT_THAT(msg, HasSubstr("timed out after 3000 ms"));
  }
}

// The default group is unaffected by the broken ones.
TEST_F(DdpUneven, DefaultGroupStillWorks) {
  Tensor t = ones({2});
  std::vector<Tensor> list{t};
  pg_->allreduce(list)->wait();
  EXPECT_TRUE(close_to(t, full({2}, Scalar(static_cast<double>(world_)), kFloat64)));
}

}  // namespace
}  // namespace ember::distributed::testing
