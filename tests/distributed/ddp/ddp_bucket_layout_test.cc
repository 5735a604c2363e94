// DistributedDataParallel::load_bucket_layout, for exact resume (examples/common/train_checkpoint.h):
// a layout saved after the rebuild is used from the first iteration, no rebuild follows, training
// still equals one process, and a layout from another model or a late call is refused by name.
#include "tests/common/error_matchers.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

constexpr double kRtol = 1e-5;

class DdpBucketLayout : public MpiTest {
 protected:
  // One parameter per bucket, so the rebuilt order is visible (and differs from the initial one).
  static Scenario scenario() {
    Scenario sc = mlp_scenario();
    sc.options.bucket_cap_mb = 1e-6;
    sc.options.first_bucket_mb = 1e-6;
    return sc;
  }
};

TEST_F(DdpBucketLayout, ALoadedLayoutIsUsedFromTheFirstIterationAndTrainsLikeOneProcess) {
  const Scenario base = scenario();
  auto first = train_ddp(base, rank_, world_);
  const auto saved = first->rebuilt_bucket_layout();
  ASSERT_FALSE(saved.empty());
  EXPECT_NE(saved, first->get_ddp_logging_data().initial_bucket_indices);

  Scenario sc = scenario();
  bool rebuilt_before_training = false;
  sc.setup = [&](DistributedDataParallel& ddp) {
    EXPECT_TRUE(ddp.rebuilt_bucket_layout().empty());
    ddp.load_bucket_layout(saved);
    rebuilt_before_training = ddp.get_ddp_logging_data().has_rebuilt_buckets;
  };
  auto resumed = train_ddp(sc, rank_, world_);
  EXPECT_TRUE(rebuilt_before_training);
  EXPECT_EQ(resumed->rebuilt_bucket_layout(), saved);  // no second rebuild replaced it
  EXPECT_TRUE(parameters_match(resumed->parameters(), reference_parameters(sc, world_), kRtol));
}

TEST_F(DdpBucketLayout, LayoutsFromAnotherModelOrTooLateAreRefused) {
  Generator g(3);
  auto ddp = std::make_shared<DistributedDataParallel>(nn::make_mlp({6, 8, 4}, &g), scenario().options);
  const std::string who = "DistributedDataParallel (rank " + std::to_string(rank_) + "): bucket layout";
  EXPECT_EMBER_ERROR(ddp->load_bucket_layout({{0, 1}, {2}}), who, "the buckets cover 3 of the model's 4 parameters");
  EXPECT_EMBER_ERROR(ddp->load_bucket_layout({{0, 1}, {1, 2, 3}}), who, "parameter index 1 appears twice");
  EXPECT_EMBER_ERROR(ddp->load_bucket_layout({{0, 1, 2, 3, 4}}), who, "parameter index 4 is out of range");
  EXPECT_EMBER_ERROR(ddp->load_bucket_layout({{0, 1, 2, 3}, {}}), who, "an empty bucket");
  sum(ddp->forward(ones({2, 6}))).backward();
  EXPECT_EMBER_ERROR(ddp->load_bucket_layout({{3, 2, 1, 0}}), "must be called before the first forward");
}

}  // namespace
}  // namespace ember::distributed::testing
