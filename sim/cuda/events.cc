// The CUDA simulator's events: a record completes when its stream reaches it, cudaStreamWaitEvent
// makes a stream wait for the latest record, queries answer cudaErrorNotReady until then (Note
// [Simulated streams], streams.cc).
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "sim/cuda/state.h"

// An event's latest record: the stream and ticket it completes at, and when the stream reached
// it. Shared with the record's work, which may run after the event is destroyed.
struct EventRecord {
  std::mutex mutex;
  ember::cudasim::StreamWorker* worker = nullptr;  // null until recorded
  uint64_t ticket = 0;
  std::chrono::steady_clock::time_point when;
};
struct CUevent_st {
  unsigned flags;
  std::shared_ptr<EventRecord> record = std::make_shared<EventRecord>();
};

using ember::cudasim::fail;

namespace {

struct Events {
  std::mutex mutex;
  std::set<cudaEvent_t> live;
};

Events& events() {
  static Events* e = new Events;  // outlives static destructors that destroy events
  return *e;
}

bool is_live_event(cudaEvent_t event) {
  Events& e = events();
  std::lock_guard<std::mutex> lock(e.mutex);
  return e.live.count(event) != 0;
}

// The event's latest record, as (stream worker, ticket); worker null when never recorded.
std::pair<ember::cudasim::StreamWorker*, uint64_t> latest_record(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(event->record->mutex);
  return {event->record->worker, event->record->ticket};
}

}  // namespace

// The stream waits for the record that is the event's latest now; a later record does not count.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  using namespace ember::cudasim;
  if (!is_live_stream(stream) || !is_live_event(event)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: stream or event is not live");
  }
  const auto [worker, ticket] = latest_record(event);
  if (worker != nullptr) {
    enqueue(stream, [worker = worker, ticket = ticket] {
      wait_for_ticket(worker, ticket);
      return std::string();
    });
  }
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue, "cudaEventCreate: null event");
  *event = new CUevent_st{flags};
  Events& e = events();
  std::lock_guard<std::mutex> lock(e.mutex);
  e.live.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Events& e = events();
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    if (event == nullptr || e.live.erase(event) == 0) {
      return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: event is not live");
    }
  }
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  using namespace ember::cudasim;
  if (!is_live_event(event) || !is_live_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: event or stream is not live");
  }
  std::shared_ptr<EventRecord> record = event->record;
  std::lock_guard<std::mutex> lock(record->mutex);  // held across enqueue: the work takes it too
  record->worker = stream_worker(stream);
  record->ticket = enqueue(stream, [record] {
    std::lock_guard<std::mutex> work_lock(record->mutex);
    record->when = std::chrono::steady_clock::now();
    return std::string();
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!is_live_event(event)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: event is not live");
  }
  const auto [worker, ticket] = latest_record(event);
  if (worker != nullptr) ember::cudasim::wait_for_ticket(worker, ticket);
  return cudaSuccess;
}

// cudaErrorNotReady until the stream reached the latest record (cudaSuccess if never recorded),
// left as the thread's last error as a GPU leaves it (the next launch check would see it).
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!is_live_event(event)) return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: event is not live");
  const auto [worker, ticket] = latest_record(event);
  if (worker != nullptr && !ember::cudasim::ticket_reached(worker, ticket)) {
    return ember::cudasim::set_last_error(cudaErrorNotReady);
  }
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || !is_live_event(start) || !is_live_event(end)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: event is not live");
  }
  if ((start->flags | end->flags) & cudaEventDisableTiming) {
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: an event was created with cudaEventDisableTiming");
  }
  for (cudaEvent_t e : {start, end}) {
    const auto [worker, ticket] = latest_record(e);
    if (worker == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    if (!ember::cudasim::ticket_reached(worker, ticket)) return ember::cudasim::set_last_error(cudaErrorNotReady);
  }
  std::lock_guard<std::mutex> lock_start(start->record->mutex);
  std::unique_lock<std::mutex> lock_end(end->record->mutex, std::defer_lock);
  if (end->record != start->record) lock_end.lock();
  *ms = std::chrono::duration<float, std::milli>(end->record->when - start->record->when).count();
  return cudaSuccess;
}
