// PollBackoff: how a thread waits between polls of something it cannot block on, under docs/design.md
// steps 10 and 12 (a bucket's allreduce running, finalize waiting for it) -- MPI requests on
// ProcessGroupMPI's communication thread, CUDA events in NcclWork::wait, the simulated NCCL's MPI
// requests. One policy, tuned per caller through PollBackoffOptions.
#pragma once

#include <chrono>
#include <cstdint>

namespace ember::distributed {

// Note [Polling without spinning]
// A rank's collective often waits for a peer that has not reached it yet: DDP's first bucket is
// ready on the faster rank milliseconds before the slower one gets there. Spinning through that
// wait (a poll and sched_yield, which under CFS keeps the spinner runnable) burns the comm thread's
// CPU for all of it, and where ranks and their comm threads share the cores, that time comes out
// of some rank's backward (ddp_bench's other_threads_cpu_ms: `bench/ddp_bench.sh scaling`).
// Sleeping between polls, though, stalls a transfer under way: Open MPI moves a collective's data
// only inside MPI_Test, and each round of its ring and each rendezvous needs a poll on both sides,
// so sleeps from early on slow a small allreduce (`bench/allreduce_bench.sh`; over TCP, the same
// binary under `scripts/cluster.sh 2 --link=1gbit`), the more as the default 50 us timer slack
// makes a 50 us sleep ~100 us. So a wait goes through four phases after each poll that finds
// nothing:
//   spin        the first spin_polls polls follow each other (a small collective ends there);
//   yield       until yield_for into the wait, sched_yield between polls;
//   sleep       then sleep_for(sleep) between polls;
//   slow sleep  past slow_after the wait is a stall, not a transfer: slow_sleep between polls,
//               while the caller's timeout check still runs every poll.
// ProcessGroupMPI's options (mpi_poll_options, process_group_mpi.cc) yield as long as the
// collective's bytes take at 1 GB/s plus 200 us, then sleep 25 us with the comm thread's timer
// slack at 1 us: the comm thread's CPU per step is a fraction of what spinning took, and allreduce
// times stay as they were. What is saved is CPU, not step time: the wake-ups preempt the training
// threads instead, and the DDP / no_sync overhead of `bench/ddp_bench.sh scaling`'s paired blocks
// is the same either way. The figures: docs/measurements.md, "Polling without spinning".

struct PollBackoffOptions {
  int64_t spin_polls = 32;
  std::chrono::nanoseconds yield_for = std::chrono::microseconds(200);
  std::chrono::nanoseconds sleep = std::chrono::microseconds(25);
  std::chrono::nanoseconds slow_after = std::chrono::seconds(1);
  std::chrono::nanoseconds slow_sleep = std::chrono::milliseconds(1);
};

enum class PollPause { kSpin, kYield, kSleep, kSlowSleep };

class PollBackoff {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PollBackoff(PollBackoffOptions options, Clock::time_point begin = Clock::now())
      : options_(options), begin_(begin) {}

  // Still in the spin phase: the next pause needs no clock.
  bool spinning() const { return misses_ < options_.spin_polls; }
  // The pause after a poll that found nothing at `now`, counted as such (the policy alone: tests
  // drive it with made-up times).
  PollPause next(Clock::time_point now);
  // next(now), carried out.
  void pause(Clock::time_point now);
  // The same, reading the clock only past the spin phase.
  void pause() { pause(spinning() ? begin_ : Clock::now()); }

 private:
  PollBackoffOptions options_;
  Clock::time_point begin_;
  int64_t misses_ = 0;
};

}  // namespace ember::distributed
