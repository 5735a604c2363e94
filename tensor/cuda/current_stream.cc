#include "tensor/cuda/current_stream.h"

#include <vector>

namespace ember::cuda {
namespace {
std::vector<cudaStream_t>& streams_of_this_thread() {
  static thread_local std::vector<cudaStream_t> streams;
  return streams;
}
}  // namespace

cudaStream_t current_stream(int device) {
  const auto& streams = streams_of_this_thread();
  return device < static_cast<int>(streams.size()) ? streams[device] : nullptr;
}

void set_current_cuda_stream(int device, cudaStream_t stream) {
  auto& streams = streams_of_this_thread();
  if (static_cast<int>(streams.size()) <= device) streams.resize(device + 1, nullptr);
  streams[device] = stream;
}

CurrentStreamGuard::CurrentStreamGuard(int device, cudaStream_t stream)
    : device_(device), previous_(current_stream(device)) {
  set_current_cuda_stream(device, stream);
}

CurrentStreamGuard::~CurrentStreamGuard() { set_current_cuda_stream(device_, previous_); }

}  // namespace ember::cuda
