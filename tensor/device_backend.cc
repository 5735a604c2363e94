#include "tensor/device_backend.h"

#include <atomic>

#include "tensor/error.h"

namespace ember {
namespace {
DeviceBackend* g_backends[2] = {nullptr, nullptr};
}

void register_device_backend(DeviceType type, DeviceBackend* backend) {
  g_backends[static_cast<int>(type)] = backend;
}

bool has_device_backend(DeviceType type) { return g_backends[static_cast<int>(type)] != nullptr; }

DeviceBackend& device_backend(DeviceType type, const char* op) {
  DeviceBackend* b = g_backends[static_cast<int>(type)];
  EMBER_CHECK(b != nullptr, op, ": no ", Device(type).str(),
              " backend: ember was built without CUDA (build with --config=cuda)");
  return *b;
}

int cuda_device_count() {
  DeviceBackend* b = g_backends[static_cast<int>(DeviceType::kCUDA)];
  return b ? b->device_count() : 0;
}

bool cuda_is_available() { return cuda_device_count() > 0; }

Device cuda_device_of_local_rank(int local_rank) {
  const int devices = cuda_device_count();
  EMBER_CHECK(devices > 0, "cuda_device_of_local_rank: no CUDA device is visible",
              has_device_backend(DeviceType::kCUDA) ? "" : " (ember was built without CUDA: --config=cuda)");
  EMBER_CHECK(local_rank >= 0, "cuda_device_of_local_rank: negative local rank ", local_rank);
  return Device(DeviceType::kCUDA, local_rank % devices);
}

DeviceMemoryStats cuda_memory_stats(int device) {
  return device_backend(DeviceType::kCUDA, "cuda_memory_stats").memory_stats(device);
}

void cuda_reset_peak_memory_stats(int device) {
  device_backend(DeviceType::kCUDA, "cuda_reset_peak_memory_stats").reset_peak_memory_stats(device);
}

namespace {
std::atomic<bool> g_allow_tf32{false};
}

void cuda_set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool cuda_allow_tf32() { return g_allow_tf32.load(); }

void cuda_empty_cache() { device_backend(DeviceType::kCUDA, "cuda_empty_cache").empty_cache(); }

DeviceMemoryStats cuda_host_memory_stats() {
  return device_backend(DeviceType::kCUDA, "cuda_host_memory_stats").host_memory_stats();
}

void cuda_host_empty_cache() {
  device_backend(DeviceType::kCUDA, "cuda_host_empty_cache").host_empty_cache();
}

}  // namespace ember
