// The pinned (page-locked) host memory cache's bookkeeping, independent of CUDA so that it is
// testable in any build, as PyTorch's CachingHostAllocator: freed blocks are kept per size class
// and handed to the next request of that class, so staging a tensor through pinned memory (the MPI
// backend's CUDA path, Tensor::pin_memory, non_blocking copies to the CPU) costs one cudaHostAlloc
// per size class instead of one per call. The CUDA backend supplies cudaHostAlloc/cudaFreeHost
// and events.
// Note [Pinned blocks and in-flight copies]: a non_blocking copy may still read or write a pinned
// block when its tensor is freed. The copy records an event on its stream against the block
// (record_use); a freed block with events becomes reusable only once all of them have completed.
// Unlike device blocks (Note [Caching allocator streams]), a host block is not tied to a stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "tensor/device_backend.h"

namespace ember::cuda {

// What the cache gets memory and events from. allocate returns nullptr when out of memory.
struct RawHostMemory {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* ptr)> free;
  std::function<void*(void* stream)> record_event;  // a new event recorded on the stream
  std::function<bool(void* event)> event_done;      // whether the event has completed
  std::function<void(void* event)> destroy_event;
};

class CachingHostAllocator {
 public:
  static constexpr size_t kMinBlock = 512;  // every request is rounded up to a power of two

  explicit CachingHostAllocator(RawHostMemory raw) : raw_(std::move(raw)) {}
  ~CachingHostAllocator();  // returns reusable blocks; live ones are left to the process exit

  static size_t size_class(size_t bytes);

  // Throws ember::Error naming the request and the cache's size when pinned memory runs out.
  void* allocate(size_t bytes);
  void deallocate(void* ptr);
  // A copy queued on `stream` uses the block holding ptr (Note [Pinned blocks and in-flight
  // copies]); a pointer into no live block is ignored.
  void record_use(const void* ptr, void* stream);
  // Whether ptr points into a pinned block, in use or cached.
  bool contains(const void* ptr) const;
  // Gives back every cached block whose copies have completed.
  void empty_cache();
  // num_device_mallocs / num_device_frees count cudaHostAlloc / cudaFreeHost calls.
  DeviceMemoryStats stats() const;

 private:
  struct Block {
    size_t size = 0;
    bool in_use = false;
    std::vector<void*> events;  // copies that may still touch it
  };

  // Moves freed blocks whose events completed to the free lists.
  void collect_completed_locked();
  void release_free_locked();

  RawHostMemory raw_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Block> blocks_;  // every pinned block, by start address
  std::vector<uintptr_t> pending_;     // freed, waiting for their events
  std::map<size_t, std::vector<uintptr_t>> free_;  // reusable, by size class
  DeviceMemoryStats stats_;
};

}  // namespace ember::cuda
