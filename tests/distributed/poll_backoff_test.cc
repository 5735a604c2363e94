// PollBackoff's phases (Note [Polling without spinning]), driven with made-up times: no sleeping.
#include <chrono>
#include <vector>

#include "distributed/poll_backoff.h"
#include "gtest/gtest.h"

namespace ember::distributed {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = PollBackoff::Clock;

struct Miss {
  microseconds at;  // into the wait
  PollPause expected;
};

void expect_phases(const PollBackoffOptions& options, const std::vector<Miss>& misses) {
  const Clock::time_point begin{};
  PollBackoff backoff(options, begin);
  for (size_t i = 0; i < misses.size(); ++i) {
    EXPECT_EQ(backoff.next(begin + misses[i].at), misses[i].expected)
        << "miss " << i << " at " << misses[i].at.count() << " us";
  }
}

TEST(PollBackoff, SpinsThenYieldsThenSleepsThenSleepsLonger) {
  PollBackoffOptions o;
  o.spin_polls = 3;
  o.yield_for = microseconds(200);
  o.slow_after = milliseconds(1000);
  // The spins ignore the time, however late; the yield window and the slow phase count from the start.
  expect_phases(o, {{microseconds(0), PollPause::kSpin},
                    {microseconds(150), PollPause::kSpin},
                    {microseconds(5000), PollPause::kSpin},
                    {microseconds(10), PollPause::kYield},
                    {microseconds(199), PollPause::kYield},
                    {microseconds(200), PollPause::kSleep},
                    {microseconds(999999), PollPause::kSleep},
                    {microseconds(1000000), PollPause::kSlowSleep},
                    {microseconds(5000000), PollPause::kSlowSleep}});
}

TEST(PollBackoff, SpinningSaysWhenTheClockIsNeeded) {
  PollBackoffOptions o;
  o.spin_polls = 2;
  PollBackoff backoff(o);
  EXPECT_TRUE(backoff.spinning());
  backoff.pause();
  EXPECT_TRUE(backoff.spinning());
  backoff.pause();
  EXPECT_FALSE(backoff.spinning());
}

TEST(PollBackoff, NoSpinPhaseAndNoSlowPhase) {
  // NcclWork::wait's options: every poll reads the clock, and sleeps stay short however long.
  PollBackoffOptions o;
  o.spin_polls = 0;
  o.yield_for = microseconds(200);
  o.slow_after = std::chrono::nanoseconds::max();
  expect_phases(o, {{microseconds(0), PollPause::kYield},
                    {microseconds(250), PollPause::kSleep},
                    {microseconds(3600000000LL), PollPause::kSleep}});
}

TEST(PollBackoff, AYieldWindowPastTheSlowPhaseYieldsToIt) {
  // A collective whose bytes would take longer than slow_after: past it, the wait is a stall.
  PollBackoffOptions o;
  o.spin_polls = 0;
  o.yield_for = std::chrono::seconds(2);
  expect_phases(o, {{microseconds(500000), PollPause::kYield}, {microseconds(1500000), PollPause::kSlowSleep}});
}

}  // namespace
}  // namespace ember::distributed
