// Note [Parallel profile]: with EMBER_PARALLEL_PROFILE=1 (set for this test in BUILD) every
// parallel_for region is timed and reported under the function that started it.
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tensor/parallel.h"
#include "tensor/parallel_profile.h"

namespace ember {
namespace {

// A region of two one-element pieces at 2 threads, one of which sleeps 10 ms: whichever thread
// runs the other piece idles for the rest of the region.
void lopsided_region() {
  parallel_for(0, 2, 1, [](int64_t begin, int64_t) {
    if (begin == 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
}

// The figures of the report's line for `site`: regions, wall_ms, idle_ms.
struct SiteLine {
  double regions = -1, wall = -1, idle = -1;
};
SiteLine site_line(const std::string& report, const std::string& site) {
  const size_t at = report.find("  " + site + "\n");
  if (at == std::string::npos) return {};
  const size_t start = report.rfind('\n', at) + 1;
  SiteLine line;
  std::istringstream(report.substr(start, at - start)) >> line.regions >> line.wall >> line.idle;
  return line;
}

TEST(ParallelProfileTest, ReportsEachCallSiteWithItsIdleThreadTime) {
  ASSERT_TRUE(parallel_profile_enabled());
  const int saved = get_num_threads();
  set_num_threads(2);
  lopsided_region();
  lopsided_region();
  parallel_for(0, 1 << 16, 1024, [](int64_t, int64_t) {});
  set_num_threads(saved);
  const std::string report = parallel_profile_report();
  SCOPED_TRACE(report);
  EXPECT_EQ(report.rfind("parallel regions (EMBER_PARALLEL_PROFILE): 3 regions, ", 0), 0u);
  // Each lopsided region lasts 10 ms or more, and one of its two threads is idle nearly all along.
  const SiteLine lopsided = site_line(report, "ember::lopsided_region::{lambda#1}");
  EXPECT_EQ(lopsided.regions, 2);
  EXPECT_GE(lopsided.wall, 20.0);
  EXPECT_GE(lopsided.idle, 0.9 * 20.0);
  EXPECT_LE(lopsided.idle, 2 * lopsided.wall);
  // A lambda in the test body is a call site of its own; its threads have next to nothing to do.
  const SiteLine body = site_line(
      report, "ember::ParallelProfileTest_ReportsEachCallSiteWithItsIdleThreadTime_Test::TestBody::"
              "{lambda#1}");
  EXPECT_EQ(body.regions, 1);
  EXPECT_GE(body.idle, 0.0);
  EXPECT_LE(body.idle, 2 * body.wall + 0.02);  // printed to 0.01 ms
}

}  // namespace
}  // namespace ember
