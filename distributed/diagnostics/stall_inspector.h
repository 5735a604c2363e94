// StallInspector: when a collective times out, names the ranks that did not arrive (in the spirit of
// Horovod's stall inspector). Each process group's ranks record the last collective they entered;
// a small responder thread per rank reports it over TCP, a side channel that does not go through
// the communication backend, so it still answers when the backend's data path is stuck. The
// watchdog (ProcessGroupMPI::wait_requests) asks every peer before it throws; the answer becomes
// the one-line timeout error and the group's stall_report(), which DDP's uneven-inputs hint reads.
// No MPI here: the backend exchanges the endpoints (see Note [Stall inspector side channel]).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ember::distributed {

// Note [Stall inspector side channel]
// The invariant: inspecting never waits on a peer for longer than its budget, and never touches the
// backend. A peer's responder answers from a slot its worker writes at the start and the end of
// every collective (progress only ever moves forward), so any thread that is alive answers at
// once, whatever the rank's main thread or worker is blocked in: a rank sleeping before a collective
// reports the one before it, "has not arrived". A stopped (SIGSTOP) or frozen process accepts the
// connection in the kernel but never answers: the query's deadline turns that into "did not
// respond". A dead one refuses the connection. All peers are asked at once, with non-blocking
// sockets and one poll() loop, so the whole inspection takes at most its budget (2 s by default)
// at any world size. Endpoints are exchanged once, when the group is built (a collective every
// member joins anyway), never after a timeout, when the communicator may be broken. Each group
// has its own responder, so sub-groups number and report their collectives on their own.

// Where a rank's responder listens, and who it is (for messages: a user can attach to the pid).
struct SideChannelEndpoint {
  std::string address;  // IPv4, dotted
  int port = 0;         // 0: this rank has no side channel (the socket could not be opened)
  int pid = 0;
  std::string host;
  // Fixed-size text record, for an allgather of kWireSize bytes per rank.
  static constexpr size_t kWireSize = 192;
  std::string to_wire() const;  // exactly kWireSize bytes
  static SideChannelEndpoint from_wire(const char* data);
  // `ranks` records laid end to end (what the allgather of to_wire() returns), by rank.
  static std::vector<SideChannelEndpoint> all_from_wire(const char* data, int ranks);
};

// What a rank's responder reports: the last collective it entered on its group.
struct CollectiveProgress {
  enum class State { kNone, kRunning, kCompleted, kFailed };
  State state = State::kNone;  // kNone: it has entered no collective on this group yet
  uint64_t sequence_number = 0;
  std::string description;  // "allreduce #3 (SUM, float32 [4], 1 tensor)"
};

// One peer's answer to a query, or why there was none.
struct PeerAnswer {
  int rank = -1;
  SideChannelEndpoint endpoint;
  bool answered = false;
  std::string failure;  // when !answered: "no answer within 2000 ms", "connection refused", ...
  bool refused = false;  // nothing listens there any more: the process exited or closed the group
  // No connection at all within the budget (or the host or network is unreachable): the network to
  // the peer's host is down, or the host is gone. A stopped process still connects (its kernel
  // accepts), then does not answer.
  bool unreachable = false;
  CollectiveProgress progress;
};

// What one inspection found, relative to the collective that timed out.
struct StallReport {
  std::vector<int> not_arrived;  // ranks, ascending
  std::vector<int> arrived;
  std::vector<int> gone;  // of not_arrived: nothing listens any more (the process exited)
  // "ranks 1, 3 did not arrive (rank 1 did not respond, no answer within 2000 ms: pid 42 on node-1
  // is stopped, hung in native code, or dead; rank 3 has not arrived: its last collective is
  // barrier #41 (...), still running); rank 2 arrived"
  std::string summary;
  bool empty() const { return summary.empty(); }
};

// Classifies the peers' answers against our own collective (`sequence_number`, `description`).
// Pure: no sockets, so the wording is unit-tested on its own.
StallReport summarize_stall(uint64_t sequence_number, const std::string& description,
                            const std::vector<PeerAnswer>& answers);

// One link probe (Note [Side channel link probes]): `bytes` sent from this rank to `peer` over the
// side channel, timed from the first byte to the peer's acknowledgement of the last.
struct LinkMeasurement {
  int peer = -1;
  std::string peer_host;
  size_t bytes = 0;
  double seconds = 0;
  bool ok = false;
  std::string failure;  // when !ok
  double megabytes_per_second() const { return ok && seconds > 0 ? bytes / seconds / 1e6 : 0.0; }
};

// "rank 1" / "ranks 1, 3"
std::string rank_list(const std::vector<int>& ranks);

// One rank's side channel for one process group, made by its backend: a responder thread answers
// the peers' progress queries, and query_peers() asks them when a collective times out.
class StallInspector {
 public:
  static constexpr std::chrono::milliseconds kDefaultBudget{2000};

  // Starts the responder: a TCP socket on an ephemeral port, bound to EMBER_SIDE_CHANNEL_ADDR when
  // set, else to the first non-loopback IPv4 address of this host, else to 127.0.0.1. Never
  // throws: without a socket, endpoint().port is 0 and peers report "has no side channel".
  explicit StallInspector(int rank);
  ~StallInspector();
  StallInspector(const StallInspector&) = delete;
  StallInspector& operator=(const StallInspector&) = delete;

  const SideChannelEndpoint& endpoint() const { return endpoint_; }
  // Every rank's endpoint, indexed by group rank (from the backend's exchange).
  void set_peers(std::vector<SideChannelEndpoint> peers);

  // Called by the backend's worker as a collective starts and ends.
  void entered(uint64_t sequence_number, std::string description);
  void finished(uint64_t sequence_number, bool ok);
  CollectiveProgress progress() const;

  // Asks every other rank for its progress, all at once, for at most `budget`.
  std::vector<PeerAnswer> query_peers(std::chrono::milliseconds budget = kDefaultBudget) const;

  // Times sending `bytes` to each of `peers` in turn (link_probe.cc); each probe gets `budget`.
  std::vector<LinkMeasurement> probe_links(const std::vector<int>& peers, size_t bytes,
                                           std::chrono::milliseconds budget) const;
  // The host name a rank's endpoint reported ("" before set_peers or out of range).
  std::string host_of(int rank) const;

  // The query's text and the answer's parsing, exposed for tests.
  static constexpr const char* kQuery = "ember-progress?\n";
  static constexpr const char* kProbeHeader = "ember-probe ";  // + byte count + "\n", then the bytes
  static bool parse_answer(const std::string& line, int* rank, CollectiveProgress* progress);

 private:
  void serve();
  std::string answer() const;

  const int rank_;
  SideChannelEndpoint endpoint_;
  std::vector<SideChannelEndpoint> peers_;  // set once, before the worker starts
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // the destructor writes to it to stop serve()
  std::thread responder_;
  mutable std::mutex progress_mutex_;  // held only to copy the slot: the responder never waits long
  CollectiveProgress progress_;
};

}  // namespace ember::distributed
