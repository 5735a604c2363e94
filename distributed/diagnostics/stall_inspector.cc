#include "distributed/diagnostics/stall_inspector.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "distributed/diagnostics/side_channel_socket.h"
#include "tensor/error.h"

namespace ember::distributed {
namespace {

using side_channel::Clock;
using side_channel::error_text;
using side_channel::listen_on;
using side_channel::make_sockaddr;
using side_channel::remaining_ms;

// How long the responder waits for a connected client's query line: a client that connects and
// says nothing must not keep the others' queries waiting.
constexpr int kServeReadMs = 200;
constexpr int kServeProbeMs = 30000;
constexpr size_t kMaxLine = 1024;

const char* state_name(CollectiveProgress::State s) {
  switch (s) {
    case CollectiveProgress::State::kNone: return "none";
    case CollectiveProgress::State::kRunning: return "running";
    case CollectiveProgress::State::kCompleted: return "completed";
    case CollectiveProgress::State::kFailed: return "failed";
  }
  return "?";
}

bool parse_state(const std::string& s, CollectiveProgress::State* out) {
  for (auto st : {CollectiveProgress::State::kNone, CollectiveProgress::State::kRunning,
                  CollectiveProgress::State::kCompleted, CollectiveProgress::State::kFailed}) {
    if (s == state_name(st)) {
      *out = st;
      return true;
    }
  }
  return false;
}

// The answer is one line: a description with a newline in it would end it early.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// EMBER_SIDE_CHANNEL_ADDR, else the first non-loopback IPv4 address that is up (what a peer on
// another host can reach), else loopback.
std::string choose_address() {
  if (const char* env = std::getenv("EMBER_SIDE_CHANNEL_ADDR"); env && *env) return env;
  std::string found = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    if (!(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
    break;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

// ---- endpoints -----------------------------------------------------------------------------------

std::string SideChannelEndpoint::to_wire() const {
  std::string text = detail::str_cat(address, ' ', port, ' ', pid, ' ', host);
  text.resize(kWireSize - 1);  // truncates an absurdly long host name; NUL-padded
  text.push_back('\0');
  return text;
}

SideChannelEndpoint SideChannelEndpoint::from_wire(const char* data) {
  SideChannelEndpoint e;
  std::istringstream in(std::string(data, strnlen(data, kWireSize)));
  in >> e.address >> e.port >> e.pid >> e.host;
  return e;
}

std::vector<SideChannelEndpoint> SideChannelEndpoint::all_from_wire(const char* data, int ranks) {
  std::vector<SideChannelEndpoint> all;
  for (int r = 0; r < ranks; ++r) all.push_back(from_wire(data + static_cast<size_t>(r) * kWireSize));
  return all;
}

// ---- the responder -------------------------------------------------------------------------------

StallInspector::StallInspector(int rank) : rank_(rank) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  endpoint_.host = host[0] ? host : "?";
  endpoint_.pid = static_cast<int>(getpid());
  endpoint_.address = choose_address();
  listen_fd_ = listen_on(endpoint_.address, &endpoint_.port);
  if (listen_fd_ < 0 && endpoint_.address != "127.0.0.1") {
    endpoint_.address = "127.0.0.1";
    listen_fd_ = listen_on(endpoint_.address, &endpoint_.port);
  }
  if (listen_fd_ < 0 || pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    endpoint_.port = 0;
    return;
  }
  responder_ = std::thread([this] { serve(); });
}

StallInspector::~StallInspector() {
  if (responder_.joinable()) {
    const char stop = 's';
    ssize_t ignored = write(wake_pipe_[1], &stop, 1);
    (void)ignored;
    responder_.join();
  }
  for (int fd : {listen_fd_, wake_pipe_[0], wake_pipe_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void StallInspector::set_peers(std::vector<SideChannelEndpoint> peers) { peers_ = std::move(peers); }

void StallInspector::entered(uint64_t sequence_number, std::string description) {
  std::lock_guard<std::mutex> lock(progress_mutex_);
  progress_.state = CollectiveProgress::State::kRunning;
  progress_.sequence_number = sequence_number;
  progress_.description = one_line(std::move(description));
}

void StallInspector::finished(uint64_t sequence_number, bool ok) {
  std::lock_guard<std::mutex> lock(progress_mutex_);
  // An inline collective (issued from a callback) may have entered after this one: keep the newer.
  if (progress_.sequence_number != sequence_number) return;
  progress_.state = ok ? CollectiveProgress::State::kCompleted : CollectiveProgress::State::kFailed;
}

CollectiveProgress StallInspector::progress() const {
  std::lock_guard<std::mutex> lock(progress_mutex_);
  return progress_;
}

// "<rank> <state> <sequence number> <description>\n"
std::string StallInspector::answer() const {
  const CollectiveProgress p = progress();
  return detail::str_cat(rank_, ' ', state_name(p.state), ' ', p.sequence_number, ' ',
                         p.description, '\n');
}

bool StallInspector::parse_answer(const std::string& line, int* rank, CollectiveProgress* progress) {
  std::istringstream in(line);
  std::string state;
  if (!(in >> *rank >> state >> progress->sequence_number)) return false;
  if (!parse_state(state, &progress->state)) return false;
  std::getline(in >> std::ws, progress->description);
  return true;
}

// Note [Side channel link probes]
// Besides progress queries, the responder takes link probes: "ember-probe N\n" and N bytes, answered
// "ok\n" once the last byte arrived, so the prober (link_probe.cc) measures the network between the
// two ranks without the backend (DDP's straggler check names a rank whose links are slow). Every
// client is served from one poll() loop, none waits for another: a probe streaming megabytes over
// a slow link never delays a stall query's answer (Note [Stall inspector side channel]). A client
// that says nothing gets kServeReadMs, a probe kServeProbeMs.
namespace {

// One client of the responder: a stall query's line, or a link probe's header and bytes.
struct ServedClient {
  int fd = -1;
  Clock::time_point deadline;
  std::string line;
  bool probing = false;  // receiving a probe's bytes
  int64_t probe_left = 0;
};

// Takes what arrived from `c`; true once the client is answered or is not ours. `answer` makes
// the progress line a query gets.
bool serve_readable(ServedClient& c, std::vector<char>& buf, const std::function<std::string()>& answer) {
  const ssize_t n = recv(c.fd, buf.data(), buf.size(), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0) return true;
  if (c.probing) {
    c.probe_left -= n;
  } else {
    c.line.append(buf.data(), static_cast<size_t>(n));
    const size_t eol = c.line.find('\n');
    const size_t header_len = std::strlen(StallInspector::kProbeHeader);
    if (c.line == StallInspector::kQuery) {
      const std::string reply = answer();
      // A few hundred bytes into a fresh socket's buffer: one non-blocking send suffices.
      ssize_t ignored = send(c.fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      (void)ignored;
      return true;
    }
    if (eol == std::string::npos || c.line.compare(0, header_len, StallInspector::kProbeHeader) != 0) {
      return eol != std::string::npos || c.line.size() >= kMaxLine;  // not ours
    }
    c.probe_left = std::atoll(c.line.c_str() + header_len) - static_cast<int64_t>(c.line.size() - eol - 1);
    c.probing = true;
    c.deadline = Clock::now() + std::chrono::milliseconds(kServeProbeMs);
  }
  if (c.probing && c.probe_left <= 0) {
    ssize_t ignored = send(c.fd, "ok\n", 3, MSG_NOSIGNAL);
    (void)ignored;
    return true;
  }
  return false;
}

}  // namespace

void StallInspector::serve() {
  std::vector<ServedClient> clients;
  std::vector<char> buf(64 * 1024);
  const auto reply = [this] { return answer(); };
  while (true) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int timeout = -1;
    for (const ServedClient& c : clients) {
      fds.push_back({c.fd, POLLIN, 0});
      const int left = remaining_ms(c.deadline);
      timeout = timeout < 0 ? left : std::min(timeout, left);
    }
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    for (size_t i = 0; i < clients.size(); ++i) {
      ServedClient& c = clients[i];
      const bool done = Clock::now() >= c.deadline || (fds[2 + i].revents && serve_readable(c, buf, reply));
      if (done) {
        close(c.fd);
        c.fd = -1;
      }
    }
    clients.erase(std::remove_if(clients.begin(), clients.end(), [](const ServedClient& c) { return c.fd < 0; }),
                  clients.end());
    if (fds[0].revents) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (client >= 0) {
        clients.push_back({client, Clock::now() + std::chrono::milliseconds(kServeReadMs), {}, false, 0});
      }
    }
  }
  for (const ServedClient& c : clients) close(c.fd);
}

std::string StallInspector::host_of(int rank) const {
  return rank >= 0 && rank < static_cast<int>(peers_.size()) ? peers_[rank].host : std::string();
}

// ---- the query -----------------------------------------------------------------------------------

namespace {

enum class QueryPhase { kConnecting, kReading, kDone };
// One peer's query in flight.
struct PendingQuery {
  int fd = -1;
  QueryPhase phase = QueryPhase::kDone;
  std::string buffer;
};

void note_connect_error(PeerAnswer& a, int err) {
  a.refused = err == ECONNREFUSED;
  a.unreachable = err == EHOSTUNREACH || err == ENETUNREACH || err == ETIMEDOUT;
  a.failure = error_text(err);
}

// Starts a non-blocking connection to a.endpoint; a failure known at once is written into `a`.
PendingQuery start_query(PeerAnswer& a) {
  PendingQuery p;
  sockaddr_in addr;
  if (a.endpoint.port == 0 || !make_sockaddr(a.endpoint.address, a.endpoint.port, &addr)) {
    a.failure = "it has no side channel";
  } else if ((p.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
    a.failure = std::string("socket: ") + error_text(errno);
  } else if (connect(p.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EINPROGRESS) {
    p.phase = QueryPhase::kConnecting;
  } else {
    note_connect_error(a, errno);
  }
  return p;
}

// The connection completed or failed: sends the query on success.
void on_connected(PendingQuery& p, PeerAnswer& a) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
  const size_t query_len = std::strlen(StallInspector::kQuery);
  p.phase = QueryPhase::kDone;
  if (err != 0) {
    note_connect_error(a, err);
  } else if (send(p.fd, StallInspector::kQuery, query_len, MSG_NOSIGNAL) != static_cast<ssize_t>(query_len)) {
    a.failure = std::string("send: ") + error_text(errno);
  } else {
    p.phase = QueryPhase::kReading;
  }
}

// Reads what arrived; once the answer's line is whole, parses it into `a`.
void on_readable(PendingQuery& p, PeerAnswer& a) {
  char buf[512];
  const ssize_t got = recv(p.fd, buf, sizeof(buf), 0);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    a.failure = got == 0 ? "it closed the connection without answering" : error_text(errno);
    p.phase = QueryPhase::kDone;
    return;
  }
  p.buffer.append(buf, static_cast<size_t>(got));
  const size_t eol = p.buffer.find('\n');
  if (eol == std::string::npos && p.buffer.size() < kMaxLine) return;
  int answered_rank = -1;
  if (!StallInspector::parse_answer(p.buffer.substr(0, eol), &answered_rank, &a.progress)) {
    a.failure = "its answer was garbled";
  } else if (answered_rank != a.rank) {
    a.failure = detail::str_cat("the endpoint answered as rank ", answered_rank);
  } else {
    a.answered = true;
  }
  p.phase = QueryPhase::kDone;
}

// Polls the queries still in flight until each is done or the deadline passes.
void run_queries(std::vector<PendingQuery>& pending, std::vector<PeerAnswer>& answers, Clock::time_point deadline) {
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i].phase == QueryPhase::kDone) continue;
      const short events = pending[i].phase == QueryPhase::kConnecting ? POLLOUT : POLLIN;
      fds.push_back({pending[i].fd, events, 0});
      which.push_back(i);
    }
    if (fds.empty()) return;
    const int left = remaining_ms(deadline);
    if (left == 0) return;
    const int n = poll(fds.data(), fds.size(), left);
    if (n < 0 && errno != EINTR) return;
    for (size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      PendingQuery& p = pending[which[k]];
      if (p.phase == QueryPhase::kConnecting) {
        on_connected(p, answers[which[k]]);
      } else {
        on_readable(p, answers[which[k]]);
      }
    }
  }
}

}  // namespace

std::vector<PeerAnswer> StallInspector::query_peers(std::chrono::milliseconds budget) const {
  const auto deadline = Clock::now() + budget;
  std::vector<PeerAnswer> answers;
  std::vector<PendingQuery> pending;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    PeerAnswer a;
    a.rank = static_cast<int>(r);
    a.endpoint = peers_[r];
    pending.push_back(start_query(a));
    answers.push_back(std::move(a));
  }
  run_queries(pending, answers, deadline);
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].phase == QueryPhase::kConnecting) {
      answers[i].unreachable = true;
      answers[i].failure = detail::str_cat("no connection within ", budget.count(), " ms");
    } else if (pending[i].phase != QueryPhase::kDone) {
      answers[i].failure = detail::str_cat("no answer within ", budget.count(), " ms");
    }
    if (pending[i].fd >= 0) close(pending[i].fd);
  }
  return answers;
}

// ---- the report ----------------------------------------------------------------------------------

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

namespace {
// The op's name: a fingerprint's first word ("allreduce" of "allreduce #3 (...)").
std::string op_word(const std::string& description) {
  return description.substr(0, description.find(' '));
}

// Why `a` did not arrive, or "" when it did.
std::string why_not_arrived(uint64_t seq, const std::string& description, const PeerAnswer& a) {
  const std::string who = detail::str_cat("rank ", a.rank);
  if (a.refused) {
    return detail::str_cat(who, " is gone, connection refused: pid ", a.endpoint.pid, " on ", a.endpoint.host,
                           " has exited, or destroyed this group");
  }
  if (a.unreachable) {
    return detail::str_cat(who, " is unreachable, ", a.failure, ": its host ", a.endpoint.host, " (",
                           a.endpoint.address, ") cannot be reached from here -- the network link to it "
                           "may be down, or the host is gone");
  }
  if (!a.answered) {
    return detail::str_cat(who, " did not respond, ", a.failure, ": pid ", a.endpoint.pid, " on ",
                           a.endpoint.host, " is stopped, hung in native code, or dead");
  }
  const CollectiveProgress& p = a.progress;
  if (p.state == CollectiveProgress::State::kNone) {
    return who + " has not arrived: it has entered no collective on this group yet";
  }
  if (p.sequence_number < seq) {
    const char* how = p.state == CollectiveProgress::State::kRunning ? "still running"
                      : p.state == CollectiveProgress::State::kFailed ? "failed"
                                                                       : "finished";
    return detail::str_cat(who, " has not arrived: its last collective is ", p.description, ", ", how);
  }
  if (p.sequence_number == seq && op_word(p.description) != op_word(description)) {
    return detail::str_cat(who, " called a different collective: ", p.description);
  }
  return "";
}
}  // namespace

StallReport summarize_stall(uint64_t sequence_number, const std::string& description,
                            const std::vector<PeerAnswer>& answers) {
  StallReport report;
  std::string reasons;
  for (const PeerAnswer& a : answers) {
    const std::string why = why_not_arrived(sequence_number, description, a);
    if (why.empty()) {
      report.arrived.push_back(a.rank);
    } else {
      report.not_arrived.push_back(a.rank);
      if (a.refused) report.gone.push_back(a.rank);
      reasons += (reasons.empty() ? "" : "; ") + why;
    }
  }
  if (report.not_arrived.empty()) {
    report.summary = answers.empty() ? "no other rank to ask"
                                     : detail::str_cat("every other rank arrived (", rank_list(report.arrived),
                                                       "): the transfer itself did not complete");
    return report;
  }
  report.summary = detail::str_cat(rank_list(report.not_arrived), " did not arrive (", reasons, ")");
  if (!report.arrived.empty()) report.summary += detail::str_cat("; ", rank_list(report.arrived), " arrived");
  return report;
}

}  // namespace ember::distributed
