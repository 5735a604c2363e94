// The stream that ember's CUDA kernels, copies and allocations use on each device: per host thread,
// the default stream unless a CurrentStreamGuard says otherwise (as torch.cuda.stream() does).
#pragma once

#include <cuda_runtime.h>

namespace ember::cuda {

cudaStream_t current_stream(int device);
// What CurrentStreamGuard and ember::CudaStreamGuard (tensor/cuda_stream.h) set.
void set_current_cuda_stream(int device, cudaStream_t stream);

class CurrentStreamGuard {
 public:
  CurrentStreamGuard(int device, cudaStream_t stream);
  ~CurrentStreamGuard();
  CurrentStreamGuard(const CurrentStreamGuard&) = delete;
  CurrentStreamGuard& operator=(const CurrentStreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

}  // namespace ember::cuda
