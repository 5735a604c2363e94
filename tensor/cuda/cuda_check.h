// CUDA_CHECK: turns a failed CUDA runtime call into an ember::Error carrying the call, the CUDA
// error name and message, and file:line. Internal to tensor/cuda/ (it includes cuda_runtime.h,
// which no header outside this folder may do).
#pragma once

#include <cuda_runtime.h>

#include "tensor/error.h"

// Extra arguments are appended to the message (e.g. the size of a failed allocation).
#define CUDA_CHECK(call, ...)                                                                \
  do {                                                                                       \
    const cudaError_t ember_cuda_err_ = (call);                                              \
    if (ember_cuda_err_ != cudaSuccess) {                                                    \
      throw ::ember::Error(::ember::detail::str_cat(                                         \
          __FILE__, ":", __LINE__, ": ", #call, " failed: ", cudaGetErrorName(ember_cuda_err_), \
          " (", cudaGetErrorString(ember_cuda_err_), ")", ##__VA_ARGS__));                   \
    }                                                                                        \
  } while (0)

namespace ember::cuda {

// Makes `index` the current device for a scope and restores the previous one (CUDA's current
// device is per host thread, and user code may have set it).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) CUDA_CHECK(cudaSetDevice(index), " (device ", index, ")");
    changed_ = previous_ != index;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);  // no throw from a destructor; the next call reports
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace ember::cuda
