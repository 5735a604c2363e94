#include "distributed/poll_backoff.h"

#include <thread>

namespace ember::distributed {

PollPause PollBackoff::next(Clock::time_point now) {
  if (misses_ < options_.spin_polls) {
    ++misses_;
    return PollPause::kSpin;
  }
  const auto waited = now - begin_;
  if (waited >= options_.slow_after) return PollPause::kSlowSleep;
  return waited < options_.yield_for ? PollPause::kYield : PollPause::kSleep;
}

void PollBackoff::pause(Clock::time_point now) {
  switch (next(now)) {
    case PollPause::kSpin:
      return;
    case PollPause::kYield:
      std::this_thread::yield();
      return;
    case PollPause::kSleep:
      std::this_thread::sleep_for(options_.sleep);
      return;
    case PollPause::kSlowSleep:
      std::this_thread::sleep_for(options_.slow_sleep);
      return;
  }
}

}  // namespace ember::distributed
