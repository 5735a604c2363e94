// The Reducer's internal asserts (DDP_INTERNAL_ASSERT, ddp_check.h), each broken on purpose: only a
// bug in DDP can reach these states, so the test reaches them through ReducerTestPeer, the friend
// that sets the Reducer's private state as such a bug would. Each case checks that its assert, and
// no other check, reports it; removing the assert fails the case. One process, FakeProcessGroup.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "distributed/ddp/distributed_data_parallel.h"
#include "nn/nn.h"
#include "tensor/all.h"
#include "tests/distributed/fake_process_group.h"
#include "tests/common/error_matchers.h"

namespace ember::distributed {

// The private state and steps the cases below break and call.
class ReducerTestPeer {
 public:
  explicit ReducerTestPeer(Reducer& r) : r_(r) {}
  void set_expect_autograd_hooks(bool on) { r_.expect_autograd_hooks_ = on; }
  void set_require_finalize(bool on) { r_.require_finalize_ = on; }
  void set_next_bucket(size_t b) { r_.next_bucket_ = b; }
  void set_pending(size_t bucket, size_t n) { r_.buckets_.at(bucket).pending = n; }
  size_t num_buckets() const { return r_.buckets_.size(); }
  void initialize_buckets(std::vector<std::vector<size_t>> layout) { r_.initialize_buckets(std::move(layout)); }
  void mark_variable_ready(size_t index) { r_.mark_variable_ready(index); }
  void mark_bucket_ready(size_t bucket) { r_.mark_bucket_ready(bucket); }
  void finalize_backward() { r_.finalize_backward(); }
  void queue_finalize_backward() { r_.queue_finalize_backward(); }

 private:
  Reducer& r_;
};

namespace testing {
namespace {

using ::testing::HasSubstr;

using ::ember::testing::error_of;

// "internal assert '<condition>' failed": the assert of that condition fired.
std::string assert_of(const std::string& condition) { return "internal assert '" + condition + "' failed"; }

Tensor batch() { return arange(0, 20, 1, kFloat32).reshape({5, 4}).div(Scalar(10.0)); }

class ReducerInvariants : public ::testing::Test {
 protected:
  ReducerInvariants() {
    DDPOptions options;
    options.process_group = group_;
    Generator g(3);
    ddp_ = std::make_shared<DistributedDataParallel>(nn::make_mlp({4, 8, 2}, &g), options);
    ddp_->reducer().load_rebuilt_buckets({{0, 1}, {2, 3}});  // two buckets of two parameters
  }
  ReducerTestPeer peer() { return ReducerTestPeer(ddp_->reducer()); }

  std::shared_ptr<FakeProcessGroup> group_ = std::make_shared<FakeProcessGroup>(0, 2);
  std::shared_ptr<DistributedDataParallel> ddp_;
};

// The flat buffers and views are rebuilt only between backward passes (PyTorch's REDUCER_CHECK
// in initialize_buckets): hooks of a running backward write into them.
TEST_F(ReducerInvariants, BucketsAreNotRebuiltDuringABackward) {
  peer().set_expect_autograd_hooks(true);
  EXPECT_THAT(error_of([&] { peer().initialize_buckets({{0, 1, 2, 3}}); }), HasSubstr(assert_of("!expect_autograd_hooks_")));
}

// A bucket's pending count reaches zero exactly when its last parameter is ready: never below.
TEST_F(ReducerInvariants, ABucketWithNothingPendingTakesNoGradient) {
  ddp_->forward(batch());  // prepare_for_backward: every bucket pending in full
  peer().set_pending(0, 0);
  EXPECT_THAT(error_of([&] { peer().mark_variable_ready(0); }), HasSubstr(assert_of("bucket.pending > 0")));
}

// Buckets launch strictly in order: one already launched cannot become ready again.
TEST_F(ReducerInvariants, ALaunchedBucketDoesNotBecomeReadyAgain) {
  ddp_->forward(batch());
  peer().set_next_bucket(1);
  EXPECT_THAT(error_of([&] { peer().mark_bucket_ready(0); }), HasSubstr(assert_of("bucket_index >= next_bucket_")));
}

// The final callback runs once every bucket was launched (PyTorch asserts next_bucket_ ==
// buckets_.size() there). Here it is queued from a backward that never reached DDP's parameters.
TEST_F(ReducerInvariants, TheFinalCallbackFindsEveryBucketLaunched) {
  ddp_->forward(batch());  // DDP now expects this iteration's hooks
  Tensor x = ones({3});
  x.set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  ReducerTestPeer p = peer();
  y.register_hook([&p](const Tensor& g) {
    p.queue_finalize_backward();
    return g;
  });
  EXPECT_THAT(error_of([&] { sum(y).backward(); }), HasSubstr(assert_of("next_bucket_ == buckets_.size()")));
}

// finalize_backward ends a backward DDP prepared, once.
TEST_F(ReducerInvariants, FinalizeEndsAPreparedBackward) {
  EXPECT_THAT(error_of([&] { peer().finalize_backward(); }), HasSubstr(assert_of("expect_autograd_hooks_")));
}

// ... whose gradients were marked ready (a forward with no backward is not finalized).
TEST_F(ReducerInvariants, FinalizeFollowsAGradientMarkedReady) {
  ddp_->forward(batch());
  EXPECT_THAT(error_of([&] { peer().finalize_backward(); }), HasSubstr(assert_of("require_finalize_")));
}

// ... and every bucket it waits for was launched (PyTorch: "Expected bucket.future_work not to be
// null. This may indicate that communication hook was not properly installed.").
TEST_F(ReducerInvariants, FinalizeWaitsOnlyForLaunchedBuckets) {
  ddp_->forward(batch());
  peer().set_require_finalize(true);
  EXPECT_THAT(error_of([&] { peer().finalize_backward(); }), HasSubstr(assert_of("bucket.future_work != nullptr")));
}

// The reported error names the rank and says whose bug it is.
TEST_F(ReducerInvariants, TheMessageNamesTheRankAndTheBug) {
  const std::string msg = error_of([&] { peer().finalize_backward(); });
  EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank 0): internal assert"));
  EXPECT_THAT(msg, HasSubstr("this is a bug in ember's DDP, please report it"));
}

// The states above are unreachable through the public API: a normal iteration passes every assert.
TEST_F(ReducerInvariants, ANormalIterationPassesThemAll) {
  for (int step = 0; step < 2; ++step) sum(ddp_->forward(batch())).backward();
  EXPECT_EQ(ddp_->reducer().logging_data().num_buckets_reduced, 2);
}

}  // namespace
}  // namespace testing
}  // namespace ember::distributed
