// State the simulator's runtime (runtime.cc) and scheduler (scheduler.cc) share: the per-host-thread
// last error, and the registry of live streams that a launch checks its stream against.
#pragma once

#include <string>

#include <cuda_runtime.h>

namespace ember::cudasim {

// Records `error` as this host thread's last error (cudaGetLastError), prints `detail` to stderr
// and keeps it for last_error_detail(); returns `error` so calls can `return fail(...)`.
cudaError_t fail(cudaError_t error, const std::string& detail);
bool is_live_stream(cudaStream_t stream);

}  // namespace ember::cudasim
