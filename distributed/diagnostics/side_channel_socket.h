// Small POSIX socket helpers shared by the side channel's responder and queries
// (stall_inspector.cc) and its link probes (link_probe.cc). Internal to //distributed.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <string>

namespace ember::distributed::side_channel {

using Clock = std::chrono::steady_clock;

bool make_sockaddr(const std::string& address, int port, sockaddr_in* out);
// A listening socket on an ephemeral port of `address`, or -1; `port` receives the port.
int listen_on(const std::string& address, int* port);
// strerror's text for the middle of a sentence: "connection refused".
std::string error_text(int err);
// Milliseconds left until `deadline`, at least 0 (a poll() timeout).
int remaining_ms(Clock::time_point deadline);

}  // namespace ember::distributed::side_channel
