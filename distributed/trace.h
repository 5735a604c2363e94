// A Chrome-trace recorder (viewable in Perfetto or chrome://tracing) for the DDP iteration: forward,
// each autograd hook, each bucket's launch and completion, finalize (DESIGN.md steps 8-12), so the
// overlap of communication with backward shows on a timeline. One JSON file per rank.
// Enable with the env var EMBER_DDP_TRACE=<directory> or DDPOptions::trace_dir.
#pragma once

#include <cstdint>
#include <functional>
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
  bool enabled() const { return enabled_ || listener_ != nullptr; }
  // Also (or instead) hand every event to `listener` as it happens: (name, start µs, lane).
  // The teaching example (examples/ddp_walkthrough) narrates an iteration this way.
  void set_listener(std::function<void(const std::string&, double, int)> listener);
  // Microseconds since the recorder was created (steady clock).
  static double now_us();
  // A span [begin, begin + duration) on lane `tid` (0 = the training thread, 1 = communication).
  void span(const std::string& name, const std::string& category, double begin_us, double duration_us,
            int tid = 0, const std::string& args_json = "");
  void instant(const std::string& name, const std::string& category, int tid = 0,
               const std::string& args_json = "");
  void flush();
  ~Trace();

 private:
  Trace();
  void add(std::string event);
  std::mutex mutex_;
  bool enabled_ = false;
  int rank_ = 0;
  std::string path_;
  std::vector<std::string> events_;
  std::function<void(const std::string&, double, int)> listener_;
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
