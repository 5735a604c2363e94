// EMBER_PARALLEL_PROFILE=1: where parallel_for's regions lose thread time, per call site.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>

namespace ember {

// Note [Parallel profile]
// A region is as long as its slowest thread: a thread that finishes early idles until the region
// ends. With EMBER_PARALLEL_PROFILE=1 in the environment, parallel_for times every region it
// starts (when it starts, when each thread begins and finishes its pieces, when it ends) and, at
// exit, prints per call site -- the body's type, which names the function that called
// parallel_for -- the regions, their wall time, the thread time idle in them (threads x wall minus
// the time threads spent taking and running pieces), how late the last thread began, and how far
// apart the first and last thread finished. Without the variable a region pays four calls that
// test a flag.
bool parallel_profile_enabled();
// The report printed at exit (also at any time, for tests): a header and one line per call site,
// most idle thread time first. Empty when the profile is disabled.
std::string parallel_profile_report();

namespace detail {

// One region's timings, taken only while the profile is enabled. Out of line, members included:
// kernels compiled for AVX2/AVX-512 use it, and code they share with the rest of the program must
// be baseline code (Note [CPU capability namespaces]).
class RegionProfile {
 public:
  explicit RegionProfile(int threads);
  ~RegionProfile();
  RegionProfile(const RegionProfile&) = delete;
  RegionProfile& operator=(const RegionProfile&) = delete;
  // Thread t began / finished taking pieces (a thread OpenMP did not start counts as idle).
  void thread_began(int t);
  void thread_finished(int t);
  // The region ended: adds it to the call site `site` (the body's type).
  void record(const std::type_info& site);

 private:
  using Clock = std::chrono::steady_clock;
  const bool enabled_;
  const int threads_;
  Clock::time_point start_;
  std::unique_ptr<Clock::time_point[]> began_, finished_;
};

}  // namespace detail
}  // namespace ember
