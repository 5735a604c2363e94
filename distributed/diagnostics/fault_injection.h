// Fault injection for the failure tests, read from the environment in this one place: a rank that
// stalls before a given collective, so the tests can check that the others fail within the
// timeout with a message naming the stalled rank.
//
//   EMBER_FAULT_STALL_RANK=R   the rank (of the default group) that stalls
//   EMBER_FAULT_STALL_AT=SEQ   before entering collective #SEQ of the default group
//   EMBER_FAULT_STALL_MODE=    sleep (default): its worker sleeps for an hour; the process stays
//                                alive, so its side channel answers "has not arrived, at #SEQ-1"
//                              sigstop: raise(SIGSTOP) freezes the whole process, responder
//                                included: "did not respond"
//
// Nothing is read unless EMBER_FAULT_STALL_RANK is set; a malformed value throws, naming the variable.
//
// Under the restarting launcher (scripts/elastic_run.py), which numbers its attempts in
// EMBER_RESTART_COUNT (0 for the first), a fault fires only in the first EMBER_FAULT_ATTEMPTS
// attempts (default 1): the restarted job is the one that must get through. The trainers'
// EMBER_FAULT_KILL_* faults (examples/common/training.h) follow the same rule.
#pragma once

#include <cstdint>

namespace ember::distributed {

struct StallFault {
  enum class Mode { kSleep, kSigstop };
  int rank = -1;  // -1: no fault
  uint64_t at = 0;
  Mode mode = Mode::kSleep;
};

// Whether the EMBER_FAULT_* faults fire in this attempt (EMBER_RESTART_COUNT < EMBER_FAULT_ATTEMPTS);
// true when neither variable is set. Read once; a malformed value throws, naming the variable.
bool faults_fire_in_this_attempt();

// Parsed once per process, on first use.
const StallFault& stall_fault_from_env();

// Called by the backend as rank `rank` of the default group is about to enter collective
// `sequence_number`: stalls there when the environment asks for it, else returns at once.
void maybe_inject_stall(int rank, uint64_t sequence_number);

}  // namespace ember::distributed
