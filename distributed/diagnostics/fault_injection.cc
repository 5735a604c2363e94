#include "distributed/diagnostics/fault_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tensor/error.h"

namespace ember::distributed {
namespace {

uint64_t parse_number(const char* name, const char* text) {
  const std::string s = text;
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  EMBER_CHECK(!s.empty() && used == s.size() && s[0] != '-', name,
              ": expected a non-negative integer, got '", s, "'");
  return value;
}

StallFault parse_stall_fault() {
  StallFault fault;
  const char* rank = std::getenv("EMBER_FAULT_STALL_RANK");
  if (!rank || !*rank) return fault;
  fault.rank = static_cast<int>(parse_number("EMBER_FAULT_STALL_RANK", rank));
  const char* at = std::getenv("EMBER_FAULT_STALL_AT");
  EMBER_CHECK(at && *at, "EMBER_FAULT_STALL_RANK is set but EMBER_FAULT_STALL_AT is not: "
              "say before which collective (sequence number) rank ", fault.rank, " stalls");
  fault.at = parse_number("EMBER_FAULT_STALL_AT", at);
  const char* mode = std::getenv("EMBER_FAULT_STALL_MODE");
  const std::string m = mode ? mode : "sleep";
  EMBER_CHECK(m == "sleep" || m == "sigstop", "EMBER_FAULT_STALL_MODE: expected sleep or sigstop, got '",
              m, "'");
  fault.mode = m == "sigstop" ? StallFault::Mode::kSigstop : StallFault::Mode::kSleep;
  return fault;
}

uint64_t number_from_env(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? parse_number(name, v) : fallback;
}

}  // namespace

bool faults_fire_in_this_attempt() {
  static const bool fire = number_from_env("EMBER_RESTART_COUNT", 0) < number_from_env("EMBER_FAULT_ATTEMPTS", 1);
  return fire;
}

const StallFault& stall_fault_from_env() {
  static const StallFault fault = parse_stall_fault();
  return fault;
}

void maybe_inject_stall(int rank, uint64_t sequence_number) {
  const StallFault& fault = stall_fault_from_env();
  if (fault.rank != rank || fault.at != sequence_number || !faults_fire_in_this_attempt()) return;
  const bool sigstop = fault.mode == StallFault::Mode::kSigstop;
  std::fprintf(stderr, "[ember.fault] rank %d: stalling before collective #%llu (EMBER_FAULT_STALL_MODE=%s)\n",
               rank, static_cast<unsigned long long>(sequence_number), sigstop ? "sigstop" : "sleep");
  std::fflush(stderr);
  if (sigstop) {
    std::raise(SIGSTOP);  // until SIGCONT or SIGKILL; after a SIGCONT the collective goes ahead
    return;
  }
  std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace ember::distributed
