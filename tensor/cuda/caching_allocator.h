// The CUDA caching allocator's bookkeeping, independent of CUDA so that it is testable in any
// build: freed blocks are kept per (size class, stream) and handed to the next request of that
// class on that stream; device memory is returned only by empty_cache() or to retry an allocation
// that ran out. The CUDA backend (cuda_backend.cc) supplies the raw cudaMalloc/cudaFree.
// Note [Caching allocator streams]: a block is reused only by allocations on the stream it was
// allocated on. Work queued on that stream before the block was freed finishes before work queued
// after its reuse, so the reuse is safe without any event. Using a block on another stream needs
// PyTorch's record_stream, which ember does not have yet (tensor/cuda/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/device_backend.h"

namespace ember::cuda {

// What the allocator gets device memory from: returns nullptr when the device is out of memory.
// The optional hooks hear of each block handed out (the bytes asked for) and taken back, on the
// block's stream: the CUDA simulator's sanitizer checks accesses against them.
struct RawDeviceMemory {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* ptr)> free;
  std::function<void(void* ptr, size_t bytes, void* stream)> handed_out;
  std::function<void(void* ptr, size_t block_bytes, void* stream)> taken_back;
};

class CachingAllocator {
 public:
  // Requests up to this size are "small": rounded up to a power of two (at least kMinBlock).
  // Larger ones are rounded up to a multiple of kLargeRounding.
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kLargeRounding = size_t{2} << 20;

  explicit CachingAllocator(RawDeviceMemory raw) : raw_(std::move(raw)) {}
  ~CachingAllocator();  // returns cached blocks; blocks still in use are left to the process exit

  static size_t size_class(size_t bytes);

  // Throws ember::Error ("CUDA out of memory ...") when even an emptied cache cannot satisfy it.
  void* allocate(size_t bytes, void* stream);
  void deallocate(void* ptr);
  void empty_cache();
  DeviceMemoryStats stats() const;
  void reset_peak_stats();

 private:
  struct Block {
    size_t size;   // its size class
    void* stream;  // the stream it was allocated for
  };
  using FreeKey = std::pair<size_t, void*>;

  void release_cached_locked();

  RawDeviceMemory raw_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> in_use_;
  std::map<FreeKey, std::vector<void*>> free_;
  DeviceMemoryStats stats_;
};

}  // namespace ember::cuda
