// A Chrome-trace recorder (viewable in Perfetto or chrome://tracing) for the DDP iteration: forward,
// each autograd hook, each bucket's launch and completion, finalize (docs/design.md steps 8-12), so the
// overlap of communication with backward shows on a timeline. One JSON file per rank.
// Enable with the env var EMBER_DDP_TRACE=<directory> or DDPOptions::trace_dir.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ember::distributed {

class Trace {
 public:
  // The process-wide recorder (disabled until enable() or EMBER_DDP_TRACE).
  static Trace& get();
  // Starts recording; `path` is written on flush() and at exit.
  void enable(const std::string& path, int rank);
  // Read on the communication thread too (bucket completion spans): atomic, as is the rank.
  bool enabled() const { return enabled_.load(std::memory_order_acquire) || has_listener_.load(std::memory_order_acquire); }
  // Also (or instead) hand every event to `listener` as it happens: (name, start µs, lane), on the
  // thread that records it (training, communication, the MPI worker), so a listener that keeps
  // state locks it. The teaching example (examples/ddp_walkthrough) narrates an iteration this way.
  // Thread-safe: events in flight on another thread finish with the listener they started with.
  void set_listener(std::function<void(const std::string&, double, int)> listener);
  // Microseconds since the recorder was created (steady clock).
  static double now_us();
  // A span [begin, begin + duration) on lane `tid` (0 = the training thread, 1 = communication,
  // 2 = the GPU's communication stream, timed by its events: ProcessGroupNCCL; 3 = ProcessGroupMPI's
  // worker, from starting a collective to its completion: Note [Queued, waiting, moving]).
  void span(const std::string& name, const std::string& category, double begin_us, double duration_us,
            int tid = 0, const std::string& args_json = "");
  void instant(const std::string& name, const std::string& category, int tid = 0,
               const std::string& args_json = "");
  void flush();
  ~Trace();

 private:
  Trace();
  using Listener = std::function<void(const std::string&, double, int)>;
  void add(std::string event);
  void notify(const std::string& name, double ts_us, int tid);
  std::mutex mutex_;  // guards path_, events_ and listener_
  std::atomic<bool> enabled_{false};
  std::atomic<bool> has_listener_{false};
  std::atomic<int> rank_{0};
  std::string path_;
  std::vector<std::string> events_;
  std::shared_ptr<const Listener> listener_;
};

// Names the collectives this thread issues within a scope ("bucket 3": the Reducer around a
// bucket's comm hook), so a backend that records device-side spans can say what each was for.
// Scopes nest; collectives a hook issues later from another thread carry no label.
class TraceLabel {
 public:
  explicit TraceLabel(std::string label);
  ~TraceLabel();
  TraceLabel(const TraceLabel&) = delete;
  TraceLabel& operator=(const TraceLabel&) = delete;
  static const std::string& current();  // "" outside any scope

 private:
  std::string previous_;
};

// RAII span on the training thread.
class TraceScope {
 public:
  TraceScope(std::string name, std::string category, std::string args_json = "");
  ~TraceScope();

 private:
  std::string name_, category_, args_;
  double begin_;
  bool on_;
};

}  // namespace ember::distributed
