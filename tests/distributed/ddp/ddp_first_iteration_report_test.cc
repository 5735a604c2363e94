// EMBER_DISTRIBUTED_DEBUG=INFO's first-iteration report (distributed/ddp_reports/first_iteration_report.h)
// on real ranks: when it appears, the bucket plans before and after the rebuild it shows agree with
// get_ddp_logging_data(), parameters without a gradient are named with their modules, and the
// trace's "ddp constructed" / "buckets rebuilt" events carry the same plans. Training with the
// report on stays equivalent to one process (1e-5 relative).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "distributed/diagnostics/debug.h"
#include "distributed/diagnostics/trace.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Sets the process-wide debug level for one test.
class DebugLevelScope {
 public:
  explicit DebugLevelScope(DebugLevel level) : previous_(debug_level()) { set_debug_level(level); }
  ~DebugLevelScope() { set_debug_level(previous_); }

 private:
  DebugLevel previous_;
};

class DdpFirstIterationReport : public MpiTest {
 protected:
  // One synchronising iteration of `ddp` on this rank's shard of step `step`'s batch.
  void iterate(DistributedDataParallel& ddp, int step) {
    auto batch = random_batches({6}, 4)(step, world_ * 4);
    auto shard = rows(batch, rank_ * 4, 4);
    nn::functional::cross_entropy(ddp.forward(shard.first), shard.second).backward();
  }
  // The report's lines that describe buckets, after the header line `after`.
  static int bucket_lines_after(const std::string& report, const std::string& after) {
    std::istringstream in(report.substr(report.find(after)));
    std::string line;
    std::getline(in, line);
    int n = 0;
    while (std::getline(in, line) && line.find("]   bucket ") != std::string::npos) ++n;
    return n;
  }
};

TEST_F(DdpFirstIterationReport, OffUnlessInfo) {
  DebugLevelScope off(DebugLevel::kOff);
  Generator g(7);
  auto ddp = std::make_shared<DistributedDataParallel>(nn::make_mlp({6, 16, 4}, &g));
  for (int step = 0; step < 3; ++step) iterate(*ddp, step);
  EXPECT_EQ(ddp->first_iteration_report(), "");
}

TEST_F(DdpFirstIterationReport, ShowsBothBucketPlansOverlapAndAdviceAfterTheRebuild) {
  DebugLevelScope info(DebugLevel::kInfo);
  Generator g(7);
  DDPOptions o;
  o.bucket_cap_mb = 0.002;  // several buckets for a small MLP
  o.first_bucket_mb = 0.001;
  auto ddp = std::make_shared<DistributedDataParallel>(nn::make_mlp({6, 16, 12, 4}, &g), o);
  iterate(*ddp, 0);
  EXPECT_EQ(ddp->first_iteration_report(), "") << "the buckets are rebuilt at the second forward";
  iterate(*ddp, 1);
  const std::string report = ddp->first_iteration_report();
  const DDPLoggingData d = ddp->get_ddp_logging_data();
  ASSERT_TRUE(d.has_rebuilt_buckets);
  ASSERT_GT(d.num_buckets, 1);
  EXPECT_THAT(report, HasSubstr("[rank " + std::to_string(rank_) + "] DDP first-iteration report"));
  EXPECT_THAT(report, HasSubstr("world size " + std::to_string(world_)));
  EXPECT_EQ(bucket_lines_after(report, "bucket plan of iteration 1"), 1) << report;
  EXPECT_EQ(bucket_lines_after(report, "bucket plan after the rebuild"), d.num_buckets) << report;
  // The rebuilt plan lists parameters in gradient order: the last layer's bias first.
  EXPECT_THAT(report, HasSubstr("after the rebuild (step 13"));
  EXPECT_THAT(report, HasSubstr("]   bucket 0 "));
  EXPECT_THAT(report, HasSubstr(": 4.bias"));
  EXPECT_THAT(report, HasSubstr("parameters that got no gradient in iteration 1: none"));
  EXPECT_THAT(report, HasSubstr("unused-parameter search: off"));
  EXPECT_THAT(report, HasSubstr("iteration 2 (" + std::to_string(d.num_buckets) + " buckets)"));
  EXPECT_THAT(report, HasSubstr("overlapped backward"));
  EXPECT_THAT(report, HasSubstr("bucket-size advisor: a reduction took"));
  EXPECT_THAT(report, HasSubstr("predicted backward by bucket_cap_mb:"));
  // Made once: later iterations leave it as it is.
  iterate(*ddp, 2);
  EXPECT_EQ(ddp->first_iteration_report(), report);
}

TEST_F(DdpFirstIterationReport, NamesParametersWithoutGradientAndTheSearchCost) {
  DebugLevelScope info(DebugLevel::kInfo);
  auto model = std::make_shared<Branchy>(11);
  model->use_branch_on = 1;  // rank 0 uses "branch"; no rank uses "never"
  set_shard(*model, rank_);
  DDPOptions o;
  o.find_unused_parameters = true;
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  iterate(*ddp, 0);
  // find_unused_parameters without static_graph keeps its buckets: the report follows iteration 1.
  const std::string report = ddp->first_iteration_report();
  EXPECT_THAT(report, HasSubstr("never.weight  (module Linear never)"));
  EXPECT_THAT(report, HasSubstr("never.bias  (module Linear never)"));
  if (rank_ == 0) {
    EXPECT_THAT(report, HasSubstr("got no gradient in iteration 1: 2 "));
    EXPECT_THAT(report, Not(HasSubstr("branch.weight  (module")));
  } else {
    EXPECT_THAT(report, HasSubstr("got no gradient in iteration 1: 4 "));
    EXPECT_THAT(report, HasSubstr("branch.weight  (module Linear branch)"));
  }
  EXPECT_THAT(report, HasSubstr("buckets: not rebuilt"));
  EXPECT_THAT(report, HasSubstr("unused-parameter search (find_unused_parameters=true): "));
  EXPECT_THAT(report, HasSubstr("ms per forward"));
}

TEST_F(DdpFirstIterationReport, RankZeroPrintsItOthersOnlyTheirUnusedParameters) {
  DebugLevelScope info(DebugLevel::kInfo);
  Generator g(7);
  auto ddp = std::make_shared<DistributedDataParallel>(nn::make_mlp({6, 16, 4}, &g));
  ::testing::internal::CaptureStderr();
  for (int step = 0; step < 2; ++step) iterate(*ddp, step);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  if (rank_ == 0) {
    EXPECT_EQ(printed, ddp->first_iteration_report());
  } else {
    EXPECT_EQ(printed, "") << "no parameter lacked a gradient here";
  }
}

TEST_F(DdpFirstIterationReport, TraceEventsCarryTheBucketPlans) {
  namespace fs = std::filesystem;
  // Under Bazel's per-test temporary directory; the trace stays enabled (process-wide) after this test.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : fs::temp_directory_path().string()) / "ember_plan_trace";
  Generator g(7);
  DDPOptions o;
  o.bucket_cap_mb = 0.002;
  o.first_bucket_mb = 0.001;
  o.trace_dir = dir.string();
  auto ddp = std::make_shared<DistributedDataParallel>(nn::make_mlp({6, 16, 12, 4}, &g), o);
  for (int step = 0; step < 2; ++step) iterate(*ddp, step);
  const DDPLoggingData d = ddp->get_ddp_logging_data();
  Trace::get().flush();
  std::ifstream in(dir / ("ember_trace_rank" + std::to_string(rank_) + ".json"));
  ASSERT_TRUE(in) << dir;
  const nlohmann::json trace = nlohmann::json::parse(in);
  auto plan_of = [&](const std::string& event) {
    nlohmann::json found;
    for (const auto& e : trace["traceEvents"]) {
      if (e["name"] == event) found = e["args"]["buckets"];
    }
    return found;
  };
  const nlohmann::json initial = plan_of("ddp constructed"), rebuilt = plan_of("buckets rebuilt");
  ASSERT_EQ(initial.size(), d.initial_bucket_indices.size());
  ASSERT_EQ(rebuilt.size(), d.bucket_indices.size());
  for (size_t b = 0; b < d.bucket_indices.size(); ++b) {
    EXPECT_EQ(rebuilt[b]["bytes"].get<int64_t>(), d.bucket_sizes[b]);
    ASSERT_EQ(rebuilt[b]["params"].size(), d.bucket_indices[b].size());
    for (size_t k = 0; k < d.bucket_indices[b].size(); ++k) {
      EXPECT_EQ(rebuilt[b]["params"][k].get<std::string>(), ddp->parameter_names()[d.bucket_indices[b][k]]);
    }
    // The bucket's memory: one slot per parameter, tiling the flat buffer in order, each as long as
    // its parameter and shaped like it.
    EXPECT_EQ(rebuilt[b]["dtype"].get<std::string>(), "float32");
    const auto params = ddp->parameters();
    int64_t end = 0;
    for (size_t k = 0; k < d.bucket_indices[b].size(); ++k) {
      const nlohmann::json& slot = rebuilt[b]["slots"][k];
      const Tensor& p = params[d.bucket_indices[b][k]];
      EXPECT_EQ(slot["param_index"].get<size_t>(), d.bucket_indices[b][k]);
      EXPECT_EQ(slot["offset"].get<int64_t>(), end);
      EXPECT_EQ(slot["length"].get<int64_t>(), p.numel());
      EXPECT_EQ(slot["shape"].get<std::vector<int64_t>>(), p.sizes());
      end += p.numel();
    }
    EXPECT_EQ(end * 4, d.bucket_sizes[b]);
  }
}

TEST_F(DdpFirstIterationReport, TrainingWithTheReportOnMatchesOneProcess) {
  DebugLevelScope info(DebugLevel::kInfo);
  Scenario sc = mlp_scenario();
  sc.options.bucket_cap_mb = 0.001;
  sc.options.first_bucket_mb = 0.0005;
  auto ddp = train_ddp(sc, rank_, world_);
  EXPECT_NE(ddp->first_iteration_report(), "");
  EXPECT_TRUE(parameters_match(ddp->module()->parameters(), reference_parameters(sc, world_), 1e-5));
}

}  // namespace
}  // namespace ember::distributed::testing
