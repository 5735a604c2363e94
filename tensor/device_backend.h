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

// What a device backend implements (CUDA's, under --config=cuda): copies, synchronisation,
// allocator counters and caches, pinned host memory, streams and events. One per DeviceType; users
// reach it through the cuda_* functions below and tensor/cuda_stream.h.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Copies nbytes between any two devices at least one of which is this backend's. With
  // non_blocking, a copy to or from pinned host memory is queued on the device's current stream and
  // may still be running when this returns (synchronise before reading or reusing the host side);
  // other copies are synchronous either way.
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t nbytes, bool non_blocking) = 0;
  virtual void synchronize(Device device) = 0;
  virtual int device_count() = 0;
  virtual DeviceMemoryStats memory_stats(int device) = 0;
  virtual void reset_peak_memory_stats(int device) = 0;
  // Gives every cached, unused block back to the device.
  virtual void empty_cache() = 0;

  // Page-locked host memory (what makes host <-> device copies asynchronous), from a cache of
  // blocks (tensor/cuda/caching_host_allocator.h).
  virtual void* allocate_pinned(size_t nbytes) = 0;
  virtual void free_pinned(void* ptr) = 0;
  virtual bool is_pinned(const void* ptr) = 0;
  virtual DeviceMemoryStats host_memory_stats() = 0;
  virtual void host_empty_cache() = 0;

  // Streams and events behind tensor/cuda_stream.h, as opaque handles (nullptr: the default
  // stream). The current stream is per host thread and device.
  virtual void* create_stream(int device) = 0;
  virtual void destroy_stream(void* stream) = 0;
  virtual void* current_stream(int device) = 0;
  virtual void set_current_stream(int device, void* stream) = 0;
  virtual void synchronize_stream(void* stream) = 0;
  virtual void* create_event(bool timing) = 0;
  virtual void destroy_event(void* event) = 0;
  virtual void record_event(void* event, void* stream) = 0;
  virtual void stream_wait_event(void* stream, void* event) = 0;
  virtual void synchronize_event(void* event) = 0;
  virtual float event_elapsed_ms(void* start, void* end) = 0;
};

void register_device_backend(DeviceType type, DeviceBackend* backend);
// Throws "<op>: no <device> backend: ember was built without CUDA (--config=cuda)" when missing.
DeviceBackend& device_backend(DeviceType type, const char* op);
bool has_device_backend(DeviceType type);

// Number of CUDA devices usable now (0 without a CUDA build, a driver, or a GPU).
int cuda_device_count();
bool cuda_is_available();
// The GPU a process with this local rank (its index among the job's processes on its host) uses:
// cuda:(local_rank mod the visible GPUs), as ProcessGroupNCCL chooses. Throws without a GPU.
Device cuda_device_of_local_rank(int local_rank);

// torch.cuda.memory_stats / reset_peak_memory_stats / empty_cache; throw without a CUDA backend.
DeviceMemoryStats cuda_memory_stats(int device = 0);
void cuda_reset_peak_memory_stats(int device = 0);
void cuda_empty_cache();
// torch.cuda.host_memory_stats / torch._C._host_emptyCache: the pinned host memory cache's
// counters (num_device_mallocs counts cudaHostAlloc calls) and giving its unused blocks back.
DeviceMemoryStats cuda_host_memory_stats();
void cuda_host_empty_cache();

// torch.backends.cuda.matmul.allow_tf32: whether float32 GEMMs on CUDA may use TF32 tensor cores
// (10-bit mantissa products). Off by default, so float32 results match the CPU to float32
// tolerance; turn it on for speed when that precision is enough. Process-wide.
void cuda_set_allow_tf32(bool allow);
bool cuda_allow_tf32();

}  // namespace ember
