// NcclWork (docs/design.md steps 9-10 on CUDA tensors): completion by events, errors from the watchdog.
#include "distributed/backends/nccl/nccl_work.h"

#include <cuda_runtime.h>

#include "distributed/poll_backoff.h"
#include "tensor/device_backend.h"
#include "tensor/error.h"

namespace ember::distributed {
namespace {

std::shared_ptr<void> create_timing_event() {
  cudaEvent_t e = nullptr;
  const cudaError_t rc = cudaEventCreate(&e);
  EMBER_CHECK(rc == cudaSuccess, "ProcessGroupNCCL: cudaEventCreate failed: ", cudaGetErrorString(rc));
  return std::shared_ptr<void>(e, [](void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); });
}

cudaStream_t current_stream(int device) {
  return static_cast<cudaStream_t>(device_backend(DeviceType::kCUDA, "ProcessGroupNCCL").current_stream(device));
}

}  // namespace

NcclWork::NcclWork(Options o)
    : Work(o.op, o.sequence_number, std::move(o.outputs), {Device(DeviceType::kCUDA, o.device)}),
      device_(o.device),
      start_(create_timing_event()),
      end_(create_timing_event()),
      started_(std::chrono::steady_clock::now()),
      timeout_(o.timeout),
      fingerprint_(std::move(o.fingerprint)),
      description_(std::move(o.description)),
      trace_label_(std::move(o.trace_label)),
      keep_alive_(std::move(o.keep_alive)) {}

NcclWork::~NcclWork() = default;

void NcclWork::mark_enqueued() {
  std::lock_guard<std::mutex> lock(mutex_);
  enqueued_ = true;
}

bool NcclWork::fail(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) return false;
  error_ = std::move(error);
  return true;
}

std::exception_ptr NcclWork::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void NcclWork::release_tensors() {
  std::vector<Tensor> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  dropped.swap(keep_alive_);
}

bool NcclWork::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) return true;
  if (!enqueued_) return false;
  const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(end_.get()));
  // "Not yet" is also left as this thread's last error, which the next kernel launch's check would
  // take for its own failure (PyTorch's fix of the same, pytorch/pytorch#18584): clear it.
  if (rc == cudaErrorNotReady) cudaGetLastError();
  return rc == cudaSuccess;
}

bool NcclWork::wait(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  // The watchdog fails a collective past the group's timeout, so this loop ends without one. The
  // first 200 us only yield between polls: a small collective ends within microseconds, and a
  // sleep of 50 us (over 100 us as the kernel grants it) was most of its measured latency (Note
  // [Polling without spinning]; every poll reads the clock for the timeout, so no spin phase).
  PollBackoffOptions polling;
  polling.spin_polls = 0;
  polling.yield_for = std::chrono::microseconds(200);
  polling.sleep = std::chrono::microseconds(50);
  polling.slow_after = std::chrono::nanoseconds::max();
  PollBackoff backoff(polling, start);
  while (!is_completed()) {
    const auto now = std::chrono::steady_clock::now();
    EMBER_CHECK(timeout.count() < 0 || now < deadline, name(), ": Work::wait timed out after ",
                timeout.count(), " ms (the collective is still running)");
    backoff.pause(now);
  }
  if (auto e = error()) std::rethrow_exception(e);
  if (auto e = get_future()->exception()) std::rethrow_exception(e);
  synchronize();
  return true;
}

void NcclWork::synchronize() { make_current_stream_wait(device_, end_.get()); }

void make_current_stream_wait(int device, void* event) {
  const cudaError_t rc = cudaStreamWaitEvent(current_stream(device), static_cast<cudaEvent_t>(event), 0);
  EMBER_CHECK(rc == cudaSuccess, "ProcessGroupNCCL: making the current stream of cuda:", device,
              " wait for a collective failed: ", cudaGetErrorString(rc));
}

float NcclWork::device_ms() const {
  float begin = 0, duration = -1.0f;
  return device_span(start_.get(), &begin, &duration) ? duration : -1.0f;
}

bool NcclWork::device_span(void* origin, float* begin_ms, float* duration_ms) const {
  if (!is_completed() || error()) return false;
  const auto elapsed = [](void* from, void* to, float* ms) {
    if (cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)) == cudaSuccess) {
      return true;
    }
    cudaGetLastError();  // not sticky: clear it
    return false;
  };
  return elapsed(origin, start_.get(), begin_ms) && elapsed(start_.get(), end_.get(), duration_ms);
}

}  // namespace ember::distributed
