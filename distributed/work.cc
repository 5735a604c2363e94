#include "distributed/work.h"

#include <thread>

namespace ember::distributed {

// Note [Callbacks run on the worker]
// A callback runs on whichever thread completes the future: the backend's worker thread for a
// collective, or the caller's thread when the future had already completed. This is what PyTorch
// does too; it keeps chaining cheap, but a slow callback delays the collectives queued behind it.

bool Future::has_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_ != nullptr;
}

std::exception_ptr Future::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool Future::wait_for(std::chrono::milliseconds timeout) {
  // A short spin first: a collective of a few KiB finishes in microseconds, and waking a thread
  // blocked on a condition variable costs about as much again.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (!completed() && std::chrono::steady_clock::now() < spin_until) std::this_thread::yield();
  if (completed()) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout.count() < 0) {
    cv_.wait(lock, [&] { return completed(); });
    return true;
  }
  return cv_.wait_for(lock, timeout, [&] { return completed(); });
}

void Future::wait(std::chrono::milliseconds timeout) {
  EMBER_CHECK(wait_for(timeout), "Future::wait: timed out after ", timeout.count(), " ms");
  if (auto e = exception()) std::rethrow_exception(e);
}

const std::vector<Tensor>& Future::value() {
  wait();
  return value_;
}

const std::vector<Tensor>& Future::const_value() const {
  EMBER_CHECK(completed(), "Future::value: the future has not completed yet (call wait() first)");
  return value_;
}

void Future::mark_completed(std::vector<Tensor> value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_INTERNAL_ASSERT(!completed(), "Future completed twice");
    value_ = std::move(value);
    completed_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  run_callbacks();
}

void Future::set_error(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_INTERNAL_ASSERT(!completed(), "Future completed twice");
    error_ = std::move(error);
    completed_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  run_callbacks();
}

void Future::run_callbacks() {
  std::vector<std::function<void(Future&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    callbacks.swap(callbacks_);
  }
  for (auto& cb : callbacks) cb(*this);
}

void Future::add_callback(std::function<void(Future&)> callback) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!completed()) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(*this);
}

FuturePtr Future::then(Callback callback) {
  auto child = std::make_shared<Future>(devices_);
  add_callback([child, callback = std::move(callback)](Future& parent) {
    if (auto e = parent.exception()) {
      child->set_error(e);
      return;
    }
    std::vector<Tensor> result;
    try {
      result = callback(parent);
    } catch (...) {
      child->set_error(std::current_exception());
      return;
    }
    child->mark_completed(std::move(result));
  });
  return child;
}

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kBroadcast: return "broadcast";
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllreduceCoalesced: return "allreduce_coalesced";
    case OpType::kReduce: return "reduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kAllgatherBase: return "allgather_base";
    case OpType::kAllgatherCoalesced: return "allgather_coalesced";
    case OpType::kGather: return "gather";
    case OpType::kScatter: return "scatter";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kAlltoallBase: return "alltoall_base";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kBarrier: return "barrier";
    case OpType::kSend: return "send";
    case OpType::kRecv: return "recv";
    case OpType::kUnknown: break;
  }
  return "unknown";
}

Work::Work(OpType op, uint64_t sequence_number, std::vector<Tensor> outputs,
           std::vector<Device> devices)
    : op_(op),
      sequence_number_(sequence_number),
      outputs_(std::move(outputs)),
      future_(std::make_shared<Future>(std::move(devices))) {}

std::string Work::name() const {
  return detail::str_cat(op_type_name(op_), " #", sequence_number_);
}

bool Work::wait(std::chrono::milliseconds timeout) {
  EMBER_CHECK(future_->wait_for(timeout), name(), ": Work::wait timed out after ", timeout.count(),
              " ms (the collective is still running)");
  if (auto e = future_->exception()) std::rethrow_exception(e);
  return true;
}

void Work::finish(std::exception_ptr error) {
  if (error) {
    future_->set_error(error);
  } else {
    future_->mark_completed(outputs_);
  }
}

WorkPtr completed_work(OpType op, uint64_t sequence_number, std::vector<Tensor> outputs,
                       std::exception_ptr error) {
  auto work = std::make_shared<Work>(op, sequence_number, std::move(outputs));
  work->finish(error);
  return work;
}

}  // namespace ember::distributed
