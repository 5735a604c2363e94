// The seam between device-agnostic tensor code and a device backend (CUDA under --config=cuda).
// A backend registers how to move bytes; kernels for ops on that device register separately.
// Without a registered backend, using the device throws an error naming the op.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/device.h"

namespace ember {

// A device allocator's counters, as torch.cuda.memory_stats() names them: bytes in tensors
// (allocated), bytes obtained from the device and not yet given back (reserved, which includes the
// cache), their peaks since the last reset, and how allocations were served.
struct DeviceMemoryStats {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t num_allocs = 0;          // requests
  int64_t num_cache_hits = 0;      // requests served from the cache
  int64_t num_device_mallocs = 0;  // cudaMalloc calls
  int64_t num_device_frees = 0;    // cudaFree calls (empty_cache, or an out-of-memory retry)
  int64_t num_ooms = 0;            // requests that failed even after emptying the cache
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Copies nbytes between any two devices at least one of which is this backend's.
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t nbytes) = 0;
  virtual void synchronize(Device device) = 0;
  virtual int device_count() = 0;
  virtual DeviceMemoryStats memory_stats(int device) = 0;
  virtual void reset_peak_memory_stats(int device) = 0;
  // Gives every cached, unused block back to the device.
  virtual void empty_cache() = 0;
};

void register_device_backend(DeviceType type, DeviceBackend* backend);
// Throws "<op>: no <device> backend: ember was built without CUDA (--config=cuda)" when missing.
DeviceBackend& device_backend(DeviceType type, const char* op);
bool has_device_backend(DeviceType type);

// Number of CUDA devices usable now (0 without a CUDA build, a driver, or a GPU).
int cuda_device_count();
bool cuda_is_available();

// torch.cuda.memory_stats / reset_peak_memory_stats / empty_cache; throw without a CUDA backend.
DeviceMemoryStats cuda_memory_stats(int device = 0);
void cuda_reset_peak_memory_stats(int device = 0);
void cuda_empty_cache();

// torch.backends.cuda.matmul.allow_tf32: whether float32 GEMMs on CUDA may use TF32 tensor cores
// (10-bit mantissa products). Off by default, so float32 results match the CPU to float32
// tolerance; turn it on for speed when that precision is enough. Process-wide.
void cuda_set_allow_tf32(bool allow);
bool cuda_allow_tf32();

}  // namespace ember
