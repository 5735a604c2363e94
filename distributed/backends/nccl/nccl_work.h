// NcclWork: a collective on ProcessGroupNCCL's communication stream (Note [NCCL streams and
// completion], process_group_nccl.cc). Complete when its end event has been reached; wait() blocks
// the host until then (or until the watchdog failed it) and makes the current stream wait too.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/work.h"

namespace ember::distributed {

class NcclWork final : public Work {
 public:
  struct Options {
    OpType op = OpType::kUnknown;
    uint64_t sequence_number = 0;
    std::vector<Tensor> outputs;
    int device = 0;
    std::chrono::milliseconds timeout{0};
    std::string fingerprint;        // "allreduce #3 (SUM, float32 [4], 1 tensor)"
    std::string description;        // the fingerprint, rank, group and device, for errors
    std::string trace_label;        // the issuing thread's TraceLabel (distributed/diagnostics/trace.h)
    std::vector<Tensor> keep_alive;  // every tensor the NCCL calls read or write
  };
  explicit NcclWork(Options options);
  ~NcclWork() override;

  bool is_completed() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;

  // The collective's time on the device, from its start and end events; negative until complete.
  float device_ms() const;
  // Its span on the device relative to `origin` (a timing cudaEvent_t recorded earlier on the
  // same device): false until complete, or if it failed.
  bool device_span(void* origin, float* begin_ms, float* duration_ms) const;
  const std::string& trace_label() const { return trace_label_; }

  // Called by ProcessGroupNCCL: the events bracketing the NCCL calls (cudaEvent_t). The end event
  // is shared: the Work's Future may outlive the Work and still make streams wait on it.
  void* start_event() const { return start_.get(); }
  void* end_event() const { return end_.get(); }
  std::shared_ptr<void> shared_end_event() const { return end_; }
  // The NCCL calls are queued (the end event is recorded); completion can be polled from now on.
  void mark_enqueued();
  // The watchdog's (or the launch's) error; the first one set wins. Returns whether it was first.
  bool fail(std::exception_ptr error);
  std::exception_ptr error() const;
  bool timed_out(std::chrono::steady_clock::time_point now) const { return now - started_ > timeout_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& description() const { return description_; }
  const std::string& fingerprint() const { return fingerprint_; }
  // The tensors the device still reads or writes; dropped once complete (the caching allocator
  // may only reuse their blocks after that: ember has no record_stream).
  void release_tensors();

 private:
  int device_;
  std::shared_ptr<void> start_;
  std::shared_ptr<void> end_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::milliseconds timeout_;
  std::string fingerprint_;
  std::string description_;
  std::string trace_label_;
  mutable std::mutex mutex_;
  bool enqueued_ = false;       // guarded by mutex_
  std::exception_ptr error_;    // guarded by mutex_
  std::vector<Tensor> keep_alive_;  // guarded by mutex_
};

// Makes the calling thread's current stream of `device` wait for `event` (a cudaEvent_t); throws
// naming the device when CUDA refuses.
void make_current_stream_wait(int device, void* event);

}  // namespace ember::distributed
