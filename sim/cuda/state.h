// State the simulator's runtime (runtime.cc), streams (streams.cc), scheduler (scheduler.cc) and
// device memory (device_memory.cc) share: the per-host-thread last error, the registry of live
// streams that a launch checks its stream against, the streams' work queues, and the device arena.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <cuda_runtime.h>

namespace ember::cudasim {
class StreamWorker;
}

struct CUstream_st {
  unsigned flags;
  ember::cudasim::StreamWorker* worker;
};

namespace ember::cudasim {

// Streams (streams.cc, Note [Simulated streams]). A piece of work returns "" or what failed.
using StreamWork = std::function<std::string()>;
StreamWorker* stream_worker(cudaStream_t stream);  // stream 0's for nullptr
StreamWorker* create_stream_worker(bool blocking);
void destroy_stream_worker(StreamWorker* worker);  // after running what it holds
// Appends `work` to `stream` (after the legacy default stream's ordering); returns its ticket.
uint64_t enqueue(cudaStream_t stream, StreamWork work);
void wait_for_ticket(StreamWorker* worker, uint64_t ticket);
bool ticket_reached(StreamWorker* worker, uint64_t ticket);
bool stream_idle(cudaStream_t stream);
// Waits for the stream's (or every stream's) work, then returns what failed there since last asked
// (as cudaErrorLaunchFailure, also this thread's last error), or cudaSuccess.
cudaError_t synchronize_stream(const char* call, cudaStream_t stream);
cudaError_t synchronize_device(const char* call);
cudaError_t report_stream_error(const char* call, cudaStream_t stream);
// Records `error` as this thread's last error without printing (cudaErrorNotReady from a query).
cudaError_t set_last_error(cudaError_t error);

// Records `error` as this host thread's last error (cudaGetLastError), prints `detail` to stderr
// and keeps it for last_error_detail(); returns `error` so calls can `return fail(...)`.
cudaError_t fail(cudaError_t error, const std::string& detail);
bool is_live_stream(cudaStream_t stream);

// The device arena (device_memory.cc): `bytes` (a multiple of 256) from it, or null when it is
// full; the first call reserves twice `capacity` of address space.
void* device_allocate(size_t bytes, size_t capacity);
void device_free(void* ptr, size_t bytes);

}  // namespace ember::cudasim
