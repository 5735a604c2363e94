#include "tensor/cuda/caching_allocator.h"

#include <algorithm>

#include "tensor/error.h"

namespace ember::cuda {

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  if (bytes <= kSmallLimit) {
    size_t c = kMinBlock;
    while (c < bytes) c *= 2;
    return c;
  }
  return (bytes + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
}

void* CachingAllocator::allocate(size_t bytes, void* stream) {
  if (bytes == 0) return nullptr;
  const size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.num_allocs;
  void* ptr = nullptr;
  auto it = free_.find({size, stream});
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    ++stats_.num_cache_hits;
  } else {
    ptr = raw_.allocate(size);
    if (ptr == nullptr && stats_.reserved_bytes > stats_.allocated_bytes) {
      // Out of memory with blocks cached: give them back and try once more, as PyTorch does.
      release_cached_locked();
      ptr = raw_.allocate(size);
    }
    if (ptr == nullptr) {
      ++stats_.num_ooms;
      EMBER_THROW("CUDA out of memory: tried to allocate ", bytes, " bytes (", size,
                  " with rounding); ", stats_.allocated_bytes, " bytes allocated by ember, ",
                  stats_.reserved_bytes, " reserved. Free tensors you no longer need, or use a "
                  "smaller batch");
    }
    ++stats_.num_device_mallocs;
    stats_.reserved_bytes += size;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  in_use_[ptr] = Block{size, stream};
  if (raw_.handed_out) raw_.handed_out(ptr, bytes, stream);
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  EMBER_INTERNAL_ASSERT(it != in_use_.end(), "CUDA caching allocator: freeing ", ptr,
                        ", which it did not allocate");
  const Block block = it->second;
  in_use_.erase(it);
  if (raw_.taken_back) raw_.taken_back(ptr, block.size, block.stream);
  stats_.allocated_bytes -= block.size;
  free_[{block.size, block.stream}].push_back(ptr);
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, ptrs] : free_) {
    for (void* p : ptrs) {
      raw_.free(p);
      ++stats_.num_device_frees;
      stats_.reserved_bytes -= key.first;
    }
  }
  free_.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

DeviceMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace ember::cuda
