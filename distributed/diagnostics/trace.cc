#include "distributed/diagnostics/trace.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "tensor/error.h"

namespace ember::distributed {
namespace {
const auto kStart = std::chrono::steady_clock::now();
std::string detail_of(double duration_us) {
  char buf[48];
  std::snprintf(buf, sizeof buf, " (%.2f ms)", duration_us / 1000.0);
  return buf;
}
thread_local std::string current_label;  // TraceLabel's, per thread

// The running kernel's boot id (one per machine and boot, whatever the namespace), or "".
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}
}  // namespace

TraceLabel::TraceLabel(std::string label) : previous_(std::move(current_label)) {
  current_label = std::move(label);
}

TraceLabel::~TraceLabel() { current_label = std::move(previous_); }

const std::string& TraceLabel::current() { return current_label; }

Trace& Trace::get() {
  static Trace trace;
  return trace;
}

Trace::Trace() = default;

Trace::~Trace() { flush(); }

namespace {
// Note [Backward node observer]: every backward node as a span on the training thread's lane.
void record_backward_node(const autograd::Node& node, std::chrono::steady_clock::time_point begin,
                          std::chrono::steady_clock::time_point end) {
  Trace& trace = Trace::get();
  if (!trace.enabled()) return;
  const double begin_us = std::chrono::duration<double, std::micro>(begin - kStart).count();
  trace.span(node.name(), "autograd", begin_us, std::chrono::duration<double, std::micro>(end - begin).count(), 0);
}
}  // namespace

double Trace::now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - kStart).count();
}

void Trace::enable(const std::string& path, int rank) {
  // EMBER_DDP_TRACE=dir: the directory is made if missing, and a trace that could not be written
  // at the end is an error now, naming the path (silently writing nothing is worse).
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  EMBER_CHECK(!error, "trace: cannot create the directory '", parent.string(), "' for '", path, "': ",
              error.message());
  {
    const std::string probe = path + ".tmp" + std::to_string(getpid());
    std::ofstream out(probe);
    EMBER_CHECK(out.good(), "trace: cannot write '", path, "': ", std::strerror(errno));
    out.close();
    std::remove(probe.c_str());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  path_ = path;
  rank_.store(rank);
  enabled_.store(true, std::memory_order_release);
  autograd::set_node_observer(&record_backward_node);  // Note [Backward node observer]
  events_.push_back("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank) +
                    ",\"args\":{\"name\":\"rank " + std::to_string(rank) + "\"}}");
  // Note [Trace clocks]: timestamps count from this process's start. The origin on the kernel's
  // monotonic clock, with the kernel's boot id, lets scripts/merge_traces.py put every rank of a
  // machine on one timeline exactly (network namespaces share the kernel); across machines it
  // aligns the "ddp constructed" instants that follow construction's broadcast instead.
  char clock[200];
  std::snprintf(clock, sizeof clock,
                "{\"name\":\"ember_clock\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"origin_us\":%.3f,"
                "\"boot_id\":\"%s\"}}",
                rank, std::chrono::duration<double, std::micro>(kStart.time_since_epoch()).count(),
                boot_id().c_str());
  events_.push_back(clock);
  const char* lanes[] = {"compute (autograd)", "communication (buckets)", "GPU communication stream (events)",
                         "MPI worker (collectives as run)"};
  for (int tid = 0; tid < 4; ++tid) {
    events_.push_back("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank) +
                      ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":\"" + lanes[tid] + "\"}}");
  }
}

void Trace::add(std::string event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

void Trace::set_listener(std::function<void(const std::string&, double, int)> listener) {
  if (listener) autograd::set_node_observer(&record_backward_node);
  std::lock_guard<std::mutex> lock(mutex_);
  has_listener_.store(static_cast<bool>(listener), std::memory_order_release);
  listener_ = listener ? std::make_shared<const Listener>(std::move(listener)) : nullptr;
}

// The listener is copied under the lock and called outside it, so a listener may itself trace,
// and set_listener never frees one that another thread is running.
void Trace::notify(const std::string& name, double ts_us, int tid) {
  if (!has_listener_.load(std::memory_order_acquire)) return;
  std::shared_ptr<const Listener> listener;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    listener = listener_;
  }
  if (listener) (*listener)(name, ts_us, tid);
}

void Trace::span(const std::string& name, const std::string& category, double begin_us,
                 double duration_us, int tid, const std::string& args_json) {
  notify(name + detail_of(duration_us), begin_us, tid);
  if (!enabled_.load(std::memory_order_acquire)) return;
  char buf[160];
  std::snprintf(buf, sizeof buf, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d", begin_us,
                duration_us, rank_.load(), tid);
  add("{\"name\":\"" + name + "\",\"cat\":\"" + category + "\"" + buf +
      (args_json.empty() ? "" : ",\"args\":" + args_json) + "}");
}

void Trace::instant(const std::string& name, const std::string& category, int tid,
                    const std::string& args_json) {
  notify(name, now_us(), tid);
  if (!enabled_.load(std::memory_order_acquire)) return;
  char buf[160];
  std::snprintf(buf, sizeof buf, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d", now_us(),
                rank_.load(), tid);
  add("{\"name\":\"" + name + "\",\"cat\":\"" + category + "\"" + buf +
      (args_json.empty() ? "" : ",\"args\":" + args_json) + "}");
}

void Trace::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_.load() || path_.empty()) return;
  // Written to a temporary name, then renamed, so a reader never sees half a file.
  const std::string tmp = path_ + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << "{\"traceEvents\":[\n";
    for (size_t i = 0; i < events_.size(); ++i) out << events_[i] << (i + 1 < events_.size() ? ",\n" : "\n");
    out << "],\"displayTimeUnit\":\"ms\"}\n";
  }
  std::rename(tmp.c_str(), path_.c_str());
}

TraceScope::TraceScope(std::string name, std::string category, std::string args_json)
    : name_(std::move(name)), category_(std::move(category)), args_(std::move(args_json)),
      begin_(Trace::now_us()), on_(Trace::get().enabled()) {}

TraceScope::~TraceScope() {
  if (on_) Trace::get().span(name_, category_, begin_, Trace::now_us() - begin_, 0, args_);
}

}  // namespace ember::distributed
