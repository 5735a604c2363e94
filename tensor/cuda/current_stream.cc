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

CurrentStreamGuard::CurrentStreamGuard(int device, cudaStream_t stream)
    : device_(device), previous_(current_stream(device)) {
  auto& streams = streams_of_this_thread();
  if (static_cast<int>(streams.size()) <= device) streams.resize(device + 1, nullptr);
  streams[device] = stream;
}

CurrentStreamGuard::~CurrentStreamGuard() { streams_of_this_thread()[device_] = previous_; }

}  // namespace ember::cuda
