// The bucket-size advisor's model (Note [Bucket-size advisor model]) on timelines worked out by
// hand, and the bucket plan's JSON and text (distributed/ddp_reports/bucket_plan.h).
#include "distributed/ddp_reports/bucket_advisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "distributed/ddp_reports/bucket_plan.h"

namespace ember::distributed {
namespace {

constexpr int64_t kMB = 1024 * 1024;

// Six 1 MB gradients ready at 1..6 ms, the graph done at 6.5 ms, reduced in three buckets of
// 1, 2 and 3 MB that launched at 1, 3 and 6 ms and each took alpha + beta * bytes.
IterationTimeline six_gradients(double alpha_ms, double beta_ms_per_mb) {
  IterationTimeline t;
  for (int i = 0; i < 6; ++i) {
    t.param_ready_ms.push_back(1.0 + i);
    t.param_bytes.push_back(kMB);
  }
  t.compute_end_ms = 6.5;
  double free_at = 0;
  const double launch[] = {1, 3, 6};
  for (int b = 0; b < 3; ++b) {
    const double start = std::max(launch[b], free_at);
    free_at = start + alpha_ms + beta_ms_per_mb * (b + 1);
    t.bucket_launch_ms.push_back(launch[b]);
    t.bucket_done_ms.push_back(free_at);
    t.bucket_bytes.push_back((b + 1) * kMB);
  }
  return t;
}

TEST(BucketAdvisor, FitsAlphaBetaAndRecommendsTheCapThatEndsBackwardFirst) {
  const BucketCapAdvice a = advise_bucket_cap(six_gradients(0.2, 0.5), kMB, 25 * kMB);
  ASSERT_TRUE(a.valid);
  EXPECT_TRUE(a.fitted);
  EXPECT_EQ(a.fitted_buckets, 3);
  EXPECT_NEAR(a.alpha_ms, 0.2, 1e-9);
  EXPECT_NEAR(a.beta_ms_per_mb, 0.5, 1e-9);
  // 25 MB: the first 1 MB bucket [1, 1.7], then five gradients at 6 ms: [6, 8.7].
  EXPECT_EQ(a.current.buckets, 2);
  EXPECT_NEAR(a.current.backward_ms, 8.7, 1e-9);
  // A bucket per gradient ends at 6.7 ms (the last one [6, 6.7]); 0.25, 0.5 and 1 MB all give it
  // and the larger cap wins the tie. 2 MB ends at 6.9: its third bucket [5, 6.2] delays the last.
  EXPECT_EQ(a.best.cap_bytes, kMB);
  EXPECT_EQ(a.best.buckets, 6);
  EXPECT_NEAR(a.best.backward_ms, 6.7, 1e-9);
  EXPECT_NEAR(a.candidates[3].backward_ms, 6.9, 1e-9);
  EXPECT_THAT(a.summary, ::testing::HasSubstr("try bucket_cap_mb=1: predicted backward 6.70 ms instead of 8.70 ms"));
}

TEST(BucketAdvisor, KeepsTheCapWhenEachReductionCostsMoreThanOverlapSaves) {
  // alpha 10 ms a reduction: every extra bucket costs more than it can hide.
  const BucketCapAdvice a = advise_bucket_cap(six_gradients(10.0, 0.01), kMB, 25 * kMB);
  ASSERT_TRUE(a.fitted);
  EXPECT_NEAR(a.alpha_ms, 10.0, 1e-6);
  EXPECT_EQ(a.best.buckets, 2);
  EXPECT_EQ(a.best.cap_bytes, 100 * kMB);
  EXPECT_NEAR(a.best.backward_ms, a.current.backward_ms, 1e-9);
  EXPECT_THAT(a.summary, ::testing::StartsWith("keep bucket_cap_mb=25"));
}

TEST(BucketAdvisor, OneBucketIsAnEstimateNotAFit) {
  IterationTimeline t;
  t.param_ready_ms = {1.0, 2.0, -1.0};  // the third parameter got no gradient
  t.param_bytes = {kMB, kMB, kMB};
  t.compute_end_ms = 2.5;
  t.bucket_launch_ms = {2.0};
  t.bucket_done_ms = {4.0};
  t.bucket_bytes = {3 * kMB};
  const BucketCapAdvice a = advise_bucket_cap(t, kMB, 25 * kMB);
  ASSERT_TRUE(a.valid);
  EXPECT_FALSE(a.fitted);
  EXPECT_NEAR(a.alpha_ms, 1.0, 1e-9);                // half the one service time
  EXPECT_NEAR(a.beta_ms_per_mb, 1.0 / 3.0, 1e-9);    // the rest per byte
  // Only the gradients that arrived are replayed: 2 MB in two buckets at 25 MB (first at 1 MB).
  EXPECT_EQ(a.current.buckets, 2);
}

TEST(BucketAdvisor, SaysTheCapCannotMatterWhenTheFirstBucketHoldsAlmostEverything) {
  // ResNet-20's shape: 1 MB of gradients, then 37 KB.
  IterationTimeline t;
  t.param_ready_ms = {1.0, 5.0};
  t.param_bytes = {kMB, 37 * 1024};  // the first bucket closes at the first: 1 MB, then 37 KB
  t.compute_end_ms = 5.5;
  t.bucket_launch_ms = {1.0, 5.0};
  t.bucket_done_ms = {3.0, 5.6};
  t.bucket_bytes = {kMB, 37 * 1024};
  const BucketCapAdvice a = advise_bucket_cap(t, kMB, 25 * kMB);
  EXPECT_THAT(a.summary, ::testing::StartsWith("bucket_cap_mb makes no difference here: after the first bucket "
                                               "(1.00 MiB) only 37.0 KiB of gradients remain"));
}

TEST(BucketAdvisor, NothingToLearnFromAnEmptyIteration) {
  EXPECT_FALSE(advise_bucket_cap(IterationTimeline{}, kMB, 25 * kMB).valid);
}

TEST(BucketPlan, JsonListsEachBucketsBytesAndParameterNames) {
  const BucketPlan plan{{{2, 1}, {0}}, {40, 24}};
  const nlohmann::json j = nlohmann::json::parse(bucket_plan_json(plan, {"a.weight", "b.bias", "b.weight"}));
  ASSERT_EQ(j["buckets"].size(), 2u);
  EXPECT_EQ(j["buckets"][0]["bytes"], 40);
  EXPECT_EQ(j["buckets"][0]["params"], nlohmann::json({"b.weight", "b.bias"}));
  EXPECT_EQ(j["buckets"][1]["params"], nlohmann::json({"a.weight"}));
}

TEST(BucketPlan, TextElidesTheMiddleOfLongBuckets) {
  std::vector<std::string> names;
  std::vector<size_t> all;
  for (size_t i = 0; i < 10; ++i) {
    names.push_back("p" + std::to_string(i));
    all.push_back(i);
  }
  const std::string text = bucket_plan_text({{all}, {3 * kMB / 2}}, names, "  ", 4);
  EXPECT_EQ(text, "  bucket 0     1.50 MiB   10 params: p0, p1, ... 6 more ..., p8, p9\n");
  EXPECT_EQ(format_bytes(96), "96 B");
  EXPECT_EQ(format_bytes(2048), "2.0 KiB");
}

}  // namespace
}  // namespace ember::distributed
