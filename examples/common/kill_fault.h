// The trainers' kill faults, for the resume, fault and restart tests: a real kill -9 of this rank
// at a chosen point (EMBER_FAULT_KILL_AT_STEP after a step, EMBER_FAULT_KILL_IN_CHECKPOINT while a
// checkpoint is written).
#pragma once

#include <cstdint>

namespace ember::examples {

// Sends this process SIGKILL when the environment variable `variable` is set to `at` and
// EMBER_FAULT_KILL_RANK is unset or `rank`; under the restarting launcher only in the attempts
// faults fire in (distributed/diagnostics/fault_injection.h). A malformed value throws, naming the variable.
void maybe_kill_self(const char* variable, int64_t at, int rank);

}  // namespace ember::examples
