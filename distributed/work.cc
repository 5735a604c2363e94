#include "distributed/work.h"

#include <thread>

namespace ember::distributed {

// Note [Callbacks run on the worker]
// A callback runs on whichever thread completes the future: the backend's worker thread for a
// collective, or the caller's thread when the future had already completed. This is what PyTorch
// does too; it keeps chaining cheap, but a slow callback delays the collectives queued behind it.
// A callback may issue collectives (they run inline, see Note [Collectives issued from callbacks
// run inline] in process_group_mpi.cc) but must not block on one that has not completed: wait()
// there throws instead of deadlocking.
// Every callback of a future runs, even when an earlier one throws: a later callback may be what
// completes another future (then()'s child, a DDP bucket), and skipping it would hang its waiter.
// The first exception is rethrown to whoever completed the future once all have run (the MPI
// worker logs it); later ones are dropped. then() callbacks never throw here: their errors go to
// the child future.

// Note [A waiter throws its own copy of the error]
// An exception_ptr's reference count lives inside libstdc++, which ThreadSanitizer cannot see: a
// thread that reads an exception object and a thread that frees it by dropping the last
// exception_ptr look unordered to it unless something ember synchronises orders the two. So:
// - Every future keeps its own copy of an ember::Error (set_error copies): a then() child does not
//   share its parent's object, which the worker frees with the parent's Work while the caller may
//   still be reading the child's (failure_test_np2, TSan tier: the caller dropped the child first).
//   A future's object is then freed only when the future is, after every holder's release of its
//   shared_ptr, which TSan does see.
// - wait() throws another copy, made while the caller still holds the Work or Future: a caller
//   reads the message in a catch block, after the temporary Work died while the exception unwound,
//   and the copy is the caller's own.
// Other exception types are shared as they are (ember throws only ember::Error across threads).
namespace {
std::exception_ptr copy_of(const std::exception_ptr& error) {
  if (error == nullptr) return error;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return std::make_exception_ptr(Error(e.message()));
  } catch (...) {
    return error;
  }
}

[[noreturn]] void rethrow_to_waiter(const std::exception_ptr& error) {
  std::rethrow_exception(copy_of(error));
}

thread_local const char* t_comm_thread_backend = nullptr;

// Waiting on the communication thread for something that is not complete would deadlock when
// that something is queued behind the very callback that waits.
[[noreturn]] void throw_blocking_on_comm_thread(const std::string& what, const char* fn) {
  EMBER_THROW(fn, ": called on the ", t_comm_thread_backend, " communication thread on ", what,
              ", which has not completed. Future callbacks (then(), add_callback) run on the "
              "communication thread, and what they wait for may be queued behind them, so waiting "
              "there would deadlock: chain the next step with then() (or then_future() when it "
              "starts a collective) instead of calling wait() or value() inside a callback");
}
}  // namespace

void mark_comm_thread(const char* backend) { t_comm_thread_backend = backend; }
const char* comm_thread_backend() { return t_comm_thread_backend; }

std::string Future::name() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return name_.empty() ? "a future" : name_;
}

void Future::set_name(std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  name_ = std::move(name);
}

bool Future::has_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_ != nullptr;
}

std::exception_ptr Future::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool Future::wait_for(std::chrono::milliseconds timeout) {
  if (t_comm_thread_backend != nullptr && !completed()) {
    throw_blocking_on_comm_thread(name(), "Future::wait");
  }
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
  if (auto e = exception()) rethrow_to_waiter(e);
  sync_streams();
}

void Future::set_stream_sync(std::function<void()> sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  stream_sync_ = std::move(sync);
}

void Future::sync_streams() const {
  std::function<void()> sync;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sync = stream_sync_;
  }
  if (sync) sync();
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
    error_ = copy_of(error);  // Note [A waiter throws its own copy of the error]
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
  std::exception_ptr first;
  for (auto& cb : callbacks) {
    try {
      sync_streams();
      cb(*this);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void Future::add_callback(std::function<void(Future&)> callback) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!completed()) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  sync_streams();
  callback(*this);
}

namespace {
// One link of a chain: runs `step` unless `parent` failed; the parent's error, or the step's,
// goes to `child`. Returns whether the step ran without throwing.
template <typename Step>
bool run_step(Future& parent, Future& child, Step&& step) {
  if (auto e = parent.exception()) {
    child.set_error(e);
    return false;
  }
  try {
    step();
  } catch (...) {
    child.set_error(std::current_exception());
    return false;
  }
  return true;
}
}  // namespace

FuturePtr Future::then(Callback callback) {
  auto child = std::make_shared<Future>(devices_);
  child->set_name("then() of " + name());
  add_callback([child, callback = std::move(callback)](Future& parent) {
    std::vector<Tensor> result;
    if (run_step(parent, *child, [&] { result = callback(parent); })) child->mark_completed(std::move(result));
  });
  return child;
}

FuturePtr Future::then_future(std::function<FuturePtr(Future&)> callback) {
  auto child = std::make_shared<Future>(devices_);
  child->set_name("then_future() of " + name());
  add_callback([child, callback = std::move(callback)](Future& parent) {
    FuturePtr inner;
    const bool started = run_step(parent, *child, [&] {
      inner = callback(parent);
      EMBER_CHECK(inner != nullptr, "Future::then_future: the callback returned no future");
    });
    if (!started) return;
    inner->add_callback([child](Future& f) {
      if (auto e = f.exception()) {
        child->set_error(e);
      } else {
        child->mark_completed(f.const_value());
      }
    });
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
    case OpType::kReduceScatterBase: return "reduce_scatter_base";
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
      future_(std::make_shared<Future>(std::move(devices))) {
  future_->set_name(name());
}

std::string Work::name() const {
  const uint64_t seq = sequence_number();
  if (seq == kUnassignedSequenceNumber) return detail::str_cat(op_type_name(op_), " (not started yet)");
  return detail::str_cat(op_type_name(op_), " #", seq);
}

void Work::set_sequence_number(uint64_t sequence_number) {
  sequence_number_.store(sequence_number, std::memory_order_release);
  future_->set_name(name());
}

bool Work::wait(std::chrono::milliseconds timeout) {
  if (t_comm_thread_backend != nullptr && !is_completed()) {
    throw_blocking_on_comm_thread(name(), "Work::wait");
  }
  EMBER_CHECK(future_->wait_for(timeout), name(), ": Work::wait timed out after ", timeout.count(),
              " ms (the collective is still running)");
  if (auto e = future_->exception()) rethrow_to_waiter(e);
  return true;
}

void Work::finish(std::exception_ptr error) {
  if (error) {
    future_->set_error(error);
  } else {
    future_->mark_completed(outputs_);
  }
}

void Work::finish_like(const Future& other) {
  if (other.has_error()) {
    future_->set_error(other.exception());
  } else {
    future_->mark_completed(other.const_value());
  }
}

WorkPtr completed_work(OpType op, uint64_t sequence_number, std::vector<Tensor> outputs,
                       std::exception_ptr error) {
  auto work = std::make_shared<Work>(op, sequence_number, std::move(outputs));
  work->finish(error);
  return work;
}

}  // namespace ember::distributed
