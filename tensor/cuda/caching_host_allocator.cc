#include "tensor/cuda/caching_host_allocator.h"

#include <algorithm>

#include "tensor/error.h"

namespace ember::cuda {

CachingHostAllocator::~CachingHostAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_completed_locked();
  release_free_locked();
}

size_t CachingHostAllocator::size_class(size_t bytes) {
  size_t c = kMinBlock;
  while (c < bytes) c *= 2;
  return c;
}

void* CachingHostAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.num_allocs;
  collect_completed_locked();
  uintptr_t start = 0;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    start = it->second.back();
    it->second.pop_back();
    ++stats_.num_cache_hits;
  } else {
    void* p = raw_.allocate(size);
    if (p == nullptr && !free_.empty()) {
      release_free_locked();  // out of pinned memory with blocks cached: give them back, retry
      p = raw_.allocate(size);
    }
    if (p == nullptr) {
      ++stats_.num_ooms;
      EMBER_THROW("pinned host memory: cudaHostAlloc of ", size, " bytes (", bytes,
                  " requested) failed; ", stats_.allocated_bytes, " bytes of pinned memory in use, ",
                  stats_.reserved_bytes, " held by ember");
    }
    start = reinterpret_cast<uintptr_t>(p);
    blocks_[start].size = size;
    ++stats_.num_device_mallocs;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  blocks_[start].in_use = true;
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return reinterpret_cast<void*>(start);
}

void CachingHostAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks_.find(start);
  EMBER_INTERNAL_ASSERT(it != blocks_.end() && it->second.in_use,
                        "pinned host allocator: freeing ", ptr, ", which it did not allocate");
  Block& block = it->second;
  block.in_use = false;
  stats_.allocated_bytes -= static_cast<int64_t>(block.size);
  if (block.events.empty()) {
    free_[block.size].push_back(start);
  } else {
    pending_.push_back(start);  // Note [Pinned blocks and in-flight copies]
  }
}

void CachingHostAllocator::record_use(const void* ptr, void* stream) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return;
  --it;
  if (p >= it->first + it->second.size || !it->second.in_use) return;
  it->second.events.push_back(raw_.record_event(stream));
}

bool CachingHostAllocator::contains(const void* ptr) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return false;
  --it;
  return p < it->first + it->second.size;
}

void CachingHostAllocator::collect_completed_locked() {
  // Events of blocks still in use are pruned too, so a long-lived staging buffer keeps few.
  for (auto& [start, block] : blocks_) {
    auto& events = block.events;
    events.erase(std::remove_if(events.begin(), events.end(),
                                [this](void* e) {
                                  if (!raw_.event_done(e)) return false;
                                  raw_.destroy_event(e);
                                  return true;
                                }),
                 events.end());
  }
  auto still_pending = std::stable_partition(pending_.begin(), pending_.end(), [this](uintptr_t s) {
    return !blocks_[s].events.empty();
  });
  for (auto it = still_pending; it != pending_.end(); ++it) free_[blocks_[*it].size].push_back(*it);
  pending_.erase(still_pending, pending_.end());
}

void CachingHostAllocator::release_free_locked() {
  for (auto& [size, starts] : free_) {
    for (uintptr_t s : starts) {
      raw_.free(reinterpret_cast<void*>(s));
      blocks_.erase(s);
      ++stats_.num_device_frees;
      stats_.reserved_bytes -= static_cast<int64_t>(size);
    }
  }
  free_.clear();
}

void CachingHostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_completed_locked();
  release_free_locked();
}

DeviceMemoryStats CachingHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace ember::cuda
