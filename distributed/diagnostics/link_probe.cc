// The prober's side of Note [Side channel link probes]: bytes sent to a peer's responder over TCP,
// timed until its acknowledgement. Blocking per peer, bounded by the budget.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/diagnostics/side_channel_socket.h"
#include "distributed/diagnostics/stall_inspector.h"
#include "tensor/error.h"

namespace ember::distributed {
namespace {

using side_channel::Clock;
using side_channel::error_text;
using side_channel::make_sockaddr;
using side_channel::remaining_ms;

// Waits until fd is ready for `events` or the deadline passes; false on the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// Sends every byte of [data, data + size) before the deadline; the failure's text otherwise.
std::string send_all(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    if (!wait_ready(fd, POLLOUT, deadline)) return "the send did not finish within the budget";
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return std::string("send: ") + error_text(errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return "";
}

// Connects to `endpoint` within the deadline: "" once connected, else why not.
std::string connect_within(int fd, const sockaddr_in& addr, Clock::time_point deadline,
                           std::chrono::milliseconds budget) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    return error_text(errno);
  }
  if (!wait_ready(fd, POLLOUT, deadline)) return detail::str_cat("no connection within ", budget.count(), " ms");
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err != 0 ? error_text(err) : "";
}

// Sends the probe's header and `bytes` bytes: "" when all went out, else why not.
std::string send_probe(int fd, size_t bytes, Clock::time_point deadline) {
  const std::string header = detail::str_cat(StallInspector::kProbeHeader, bytes, "\n");
  std::string failure = send_all(fd, header.data(), header.size(), deadline);
  static const std::vector<char> chunk(256 * 1024, 'e');
  for (size_t left = bytes; failure.empty() && left > 0;) {
    const size_t n = std::min(left, chunk.size());
    failure = send_all(fd, chunk.data(), n, deadline);
    left -= n;
  }
  return failure;
}

// Waits for the responder's "ok\n": "" when it came, else why not.
std::string await_acknowledgement(int fd, Clock::time_point deadline, std::chrono::milliseconds budget) {
  std::string reply;
  while (reply.find('\n') == std::string::npos) {
    if (!wait_ready(fd, POLLIN, deadline)) return detail::str_cat("no acknowledgement within ", budget.count(), " ms");
    char buf[16];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return "it closed the connection before acknowledging";
    reply.append(buf, static_cast<size_t>(n));
  }
  return reply == "ok\n" ? "" : "its acknowledgement was garbled";
}

void probe_one(const SideChannelEndpoint& endpoint, size_t bytes, std::chrono::milliseconds budget,
               LinkMeasurement* m) {
  const auto deadline = Clock::now() + budget;
  sockaddr_in addr;
  if (endpoint.port == 0 || !make_sockaddr(endpoint.address, endpoint.port, &addr)) {
    m->failure = "it has no side channel";
    return;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    m->failure = std::string("socket: ") + error_text(errno);
    return;
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  m->failure = connect_within(fd, addr, deadline, budget);
  if (!m->failure.empty()) return;
  // Timed from the first byte: connection set-up is latency, not the link's rate.
  const auto start = Clock::now();
  m->failure = send_probe(fd, bytes, deadline);
  if (m->failure.empty()) m->failure = await_acknowledgement(fd, deadline, budget);
  if (!m->failure.empty()) return;
  m->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  m->ok = true;
}

}  // namespace

std::vector<LinkMeasurement> StallInspector::probe_links(const std::vector<int>& peers, size_t bytes,
                                                         std::chrono::milliseconds budget) const {
  std::vector<LinkMeasurement> out;
  for (int peer : peers) {
    EMBER_CHECK(peer >= 0 && peer < static_cast<int>(peers_.size()) && peer != rank_,
                "probe_links: rank ", rank_, " cannot probe rank ", peer, " (group of ",
                peers_.size(), " ranks)");
    LinkMeasurement m;
    m.peer = peer;
    m.peer_host = peers_[peer].host;
    m.bytes = bytes;
    probe_one(peers_[peer], bytes, budget, &m);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ember::distributed
