#include "examples/common/kill_fault.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "distributed/diagnostics/fault_injection.h"
#include "examples/common/whole_number.h"

namespace ember::examples {

namespace {

int64_t int_from_env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? flags::parse_int64(v) : -1;
}

}  // namespace

void maybe_kill_self(const char* variable, int64_t at, int rank) {
  if (int_from_env(variable) != at) return;
  const int64_t kill_rank = int_from_env("EMBER_FAULT_KILL_RANK");
  if ((kill_rank >= 0 && kill_rank != rank) || !distributed::faults_fire_in_this_attempt()) return;
  std::fprintf(stderr, "[rank %d] %s=%lld: sending myself SIGKILL\n", rank, variable, static_cast<long long>(at));
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
}

}  // namespace ember::examples
