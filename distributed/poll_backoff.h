// PollBackoff: how a thread waits between polls of something it cannot block on, under DESIGN.md
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
// wait (a poll and sched_yield, which under CFS keeps the spinner runnable) cost 7.5-69 ms (median
// 17) of comm-thread CPU per step in 2-rank ResNet-20 DDP over MPI (ddp_bench's
// other_threads_cpu_ms), and where ranks and their comm threads share the cores, that time comes out
// of some rank's backward.
// Sleeping between polls, though, stalls a transfer under way: Open MPI moves a collective's data
// only inside MPI_Test, and each round of its ring and each rendezvous needs a poll on both sides.
// With 50 us sleeps from the 200th us on, 1 MiB over shared memory went from 450 to 820 us, and 64
// KiB over 1 Gbit/s TCP from 550 to 700 us (the default 50 us timer slack makes such a sleep ~100
// us). So a wait goes through four phases after each poll that finds nothing:
//   spin        the first spin_polls polls follow each other (a small collective ends there);
//   yield       until yield_for into the wait, sched_yield between polls;
//   sleep       then sleep_for(sleep) between polls;
//   slow sleep  past slow_after the wait is a stall, not a transfer: slow_sleep between polls,
//               while the caller's timeout check still runs every poll.
// ProcessGroupMPI's options (mpi_poll_options, process_group_mpi.cc) give the measurements: yield
// as long as the collective's bytes take at 1 GB/s plus 200 us, then 25 us sleeps with the comm
// thread's timer slack at 1 us. Comm-thread CPU 3.4-5.1 ms per step, allreduce over shared memory
// unchanged, over 1 Gbit/s TCP within 1.3% at 64 KiB to 4 MiB. Sleeping a 16th of the wait so far,
// up to 500 us, took that DDP to 1.5-2.1 ms but 1 MiB over 1 Gbit/s TCP from 8.9 to 10.5 ms.
// What it does not show: a faster step. The wake-ups preempt the training threads instead (~100-500
// involuntary switches per step against ~20-50 when spinning), and ddp_bench --mode=paired gave the
// same DDP / no_sync overhead either way (median 1.029 vs 1.036, 12 rounds each, a 2-vCPU VM).
// SCHED_BATCH for the comm thread cut the preemptions 5-10x but raised comm_wait; not kept.

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
