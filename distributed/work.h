// Work and Future: the handles every ProcessGroup collective returns (PyTorch's c10d::Work and
// c10::ivalue::Future). DDP's comm hooks (docs/design.md step 10) chain Futures with then(); errors raised
// inside a collective or a callback surface from wait()/value() on the caller's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ember::distributed {

// "Wait forever" for wait(timeout); a group's own watchdog still bounds every collective.
constexpr std::chrono::milliseconds kNoTimeout{-1};

// Marks the calling thread, for the rest of its life, as `backend`'s communication thread (the MPI
// worker): blocking there on an incomplete Future or Work throws instead of deadlocking (Note
// [Collectives issued from callbacks run inline], process_group_mpi.cc).
void mark_comm_thread(const char* backend);
// The backend name given to mark_comm_thread on this thread, or nullptr.
const char* comm_thread_backend();

// A value (a list of tensors) that becomes available later, or an error.
class Future : public std::enable_shared_from_this<Future> {
 public:
  explicit Future(std::vector<Device> devices = {kCPU}) : devices_(std::move(devices)) {}
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  using Callback = std::function<std::vector<Tensor>(Future&)>;

  bool completed() const { return completed_.load(std::memory_order_acquire); }
  bool has_error() const;
  std::exception_ptr exception() const;
  // Blocks until completed; rethrows the error, if any. A finite timeout that expires throws, and
  // so does any wait on an incomplete future from a communication thread (a callback must chain
  // with then() instead; Note [Collectives issued from callbacks run inline]).
  void wait(std::chrono::milliseconds timeout = kNoTimeout);
  // Blocks until completed or `timeout` passes; returns completed(). Throws only where wait()
  // would deadlock: on a communication thread, for a future not completed yet.
  bool wait_for(std::chrono::milliseconds timeout);
  // wait(), then the value.
  const std::vector<Tensor>& value();
  // The value without throwing when the future failed (empty then); requires completed().
  const std::vector<Tensor>& const_value() const;

  // Runs `callback(*this)` once this future completes (immediately if it already has) and returns
  // a future holding its result. If this future failed, or the callback throws, the returned future
  // holds that error. Callbacks run on the thread that completes this future (the MPI worker),
  // so they must be short; see Note [Callbacks run on the worker].
  std::shared_ptr<Future> then(Callback callback);
  // Like then(), for a callback that starts more asynchronous work (typically a collective) and
  // returns its future: the returned future completes with that future's value or error. This is
  // how a comm hook runs several collective rounds without blocking.
  std::shared_ptr<Future> then_future(std::function<std::shared_ptr<Future>(Future&)> callback);
  // Like then(), without a result. Every callback runs even if an earlier one throws; see Note
  // [Callbacks run on the worker] for where the exception goes.
  void add_callback(std::function<void(Future&)> callback);

  void mark_completed(std::vector<Tensor> value = {});
  void set_error(std::exception_ptr error);

  // For a device backend (NCCL): makes the calling thread's current stream wait for the value.
  // Run by wait() (so value()) and before every callback, on the thread about to use the value,
  // as PyTorch's CUDAFuture does (Note [NCCL streams and completion], process_group_nccl.cc).
  void set_stream_sync(std::function<void()> sync);

  const std::vector<Device>& devices() const { return devices_; }
  // What errors call this future: "allreduce #3", "then() of allreduce #3", or "future".
  std::string name() const;
  void set_name(std::string name);

 private:
  void run_callbacks();
  void sync_streams() const;

  std::vector<Device> devices_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> completed_{false};
  std::vector<Tensor> value_;
  std::exception_ptr error_;
  std::vector<std::function<void(Future&)>> callbacks_;
  std::string name_;  // guarded by mutex_
  std::function<void()> stream_sync_;  // guarded by mutex_
};
using FuturePtr = std::shared_ptr<Future>;

// Which collective a Work belongs to; also part of the DETAIL fingerprint (debug.h).
enum class OpType : int32_t {
  kBroadcast = 0,
  kAllreduce,
  kAllreduceCoalesced,
  kReduce,
  kAllgather,
  kAllgatherBase,
  kAllgatherCoalesced,
  kGather,
  kScatter,
  kReduceScatter,
  kReduceScatterBase,
  kAlltoallBase,
  kAlltoall,
  kBarrier,
  kSend,
  kRecv,
  kUnknown,
};
const char* op_type_name(OpType op);

// A Work whose backend numbers collectives when they start, not when they are issued.
constexpr uint64_t kUnassignedSequenceNumber = ~uint64_t{0};

// One collective in flight. A backend completes it with finish(); the caller waits on it or
// chains work onto get_future(). Device-agnostic: a stream-based backend (NCCL) overrides
// synchronize() and is_completed() to consult its events.
class Work {
 public:
  Work(OpType op, uint64_t sequence_number, std::vector<Tensor> outputs,
       std::vector<Device> devices = {kCPU});
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  virtual bool is_completed() const { return future_->completed(); }
  bool is_success() const { return is_completed() && !future_->has_error(); }
  std::exception_ptr exception() const { return future_->exception(); }
  // Blocks until the collective finishes or `timeout` passes; rethrows the collective's error.
  // Returns true; a timeout that expires throws an ember::Error naming the collective.
  virtual bool wait(std::chrono::milliseconds timeout = kNoTimeout);
  // Makes the current stream wait for the collective (a no-op for CPU backends).
  virtual void synchronize() {}
  // The tensors the collective wrote (wait first).
  std::vector<Tensor> result() const { return future_->const_value(); }
  FuturePtr get_future() const { return future_; }

  OpType op_type() const { return op_; }
  // kUnassignedSequenceNumber until the backend numbered it (the MPI backend does so when the
  // collective starts: Note [Collectives issued from callbacks run inline]).
  uint64_t sequence_number() const { return sequence_number_.load(std::memory_order_acquire); }
  const std::vector<Device>& devices() const { return future_->devices(); }
  // "allreduce #12" (or "allreduce (not started yet)"): how errors and logs name this collective.
  std::string name() const;

  // Called by the backend, before finish(), when it numbers the collective.
  void set_sequence_number(uint64_t sequence_number);
  // Called by the backend exactly once.
  void finish(std::exception_ptr error = nullptr);
  // Instead of finish(), by a group that hands the collective to another (ProcessGroupWrapper):
  // completes as `other` did, with its value or its error.
  void finish_like(const Future& other);

 private:
  OpType op_;
  std::atomic<uint64_t> sequence_number_;
  std::vector<Tensor> outputs_;
  FuturePtr future_;
};
using WorkPtr = std::shared_ptr<Work>;

// A Work that is already done (used for no-op collectives and by single-process fakes).
WorkPtr completed_work(OpType op, uint64_t sequence_number, std::vector<Tensor> outputs,
                       std::exception_ptr error = nullptr);

}  // namespace ember::distributed
