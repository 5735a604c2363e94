// CollectiveLifecycle: step 2 of every collective on every backend (Note [One lifecycle for every
// collective], process_group_collectives.cc): number it in execution order, tell the diagnostics
// (fault injection, the stall inspector), refuse it on a broken group, and record why a group broke.
// A backend owns one and calls enter() where its collectives start and finish() where they end.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "distributed/diagnostics/stall_inspector.h"

namespace ember::distributed {

class CollectiveLifecycle {
 public:
  struct Options {
    int rank = 0;
    // The world group: EMBER_FAULT_STALL_* stall this rank before a given collective (fault_injection.h).
    bool inject_faults = false;
  };
  explicit CollectiveLifecycle(Options options);

  // The next collective's sequence number. Backends take it where the collective starts, in the
  // order every rank runs them (Note [Collectives issued from callbacks run inline]).
  uint64_t next_sequence_number() { return next_sequence_number_.fetch_add(1); }
  // Collective `seq` (described by its fingerprint) starts: stalls here when fault injection asks,
  // registers with the stall inspector, then throws "the group is unusable: <why>" on a broken group.
  void enter(uint64_t seq, const std::string& fingerprint);
  // Collective `seq` ended, completed or not.
  void finish(uint64_t seq, bool ok) { inspector_.finished(seq, ok); }

  // Marks the group unusable for `why`, with what the stall inspector found; the first call wins
  // (returns false for the later ones): later errors refer to the stall that broke it.
  bool break_group(std::string why, StallReport report = {});
  std::string broken_reason() const;
  bool broken() const { return !broken_reason().empty(); }
  StallReport stall_report() const;

  StallInspector& inspector() { return inspector_; }
  const StallInspector& inspector() const { return inspector_; }

 private:
  const Options options_;
  std::atomic<uint64_t> next_sequence_number_{0};
  StallInspector inspector_;
  mutable std::mutex mutex_;  // guards broken_ and stall_report_
  std::string broken_;
  StallReport stall_report_;
};

}  // namespace ember::distributed
