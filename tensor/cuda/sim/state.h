// State the simulator's runtime (runtime.cc), scheduler (scheduler.cc) and device memory
// (device_memory.cc) share: the per-host-thread last error, the registry of live streams that a
// launch checks its stream against, and the device arena.
#pragma once

#include <string>

#include <cuda_runtime.h>

namespace ember::cudasim {

// Records `error` as this host thread's last error (cudaGetLastError), prints `detail` to stderr
// and keeps it for last_error_detail(); returns `error` so calls can `return fail(...)`.
cudaError_t fail(cudaError_t error, const std::string& detail);
bool is_live_stream(cudaStream_t stream);

// The device arena (device_memory.cc): `bytes` (a multiple of 256) from it, or null when it is
// full; the first call reserves twice `capacity` of address space.
void* device_allocate(size_t bytes, size_t capacity);
void device_free(void* ptr, size_t bytes);

}  // namespace ember::cudasim
