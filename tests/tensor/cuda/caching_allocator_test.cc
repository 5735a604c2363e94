// The CUDA caching allocator's bookkeeping over a fake device (this suite needs no CUDA): size
// classes, reuse per stream, statistics, empty_cache, and the out-of-memory retry and message.
// tests/tensor/cuda_test.cc checks the same allocator behind real tensors on the CUDA backend.
#include "tensor/cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "tests/tensor/test_util.h"

namespace ember::cuda {
namespace {

// A device of `capacity` bytes that records what was taken from it.
struct FakeDevice {
  size_t capacity;
  size_t used = 0;
  std::map<void*, size_t> live;

  RawDeviceMemory raw() {
    return RawDeviceMemory{[this](size_t bytes) -> void* {
                             if (used + bytes > capacity) return nullptr;
                             used += bytes;
                             void* p = std::malloc(bytes);
                             live[p] = bytes;
                             return p;
                           },
                           [this](void* p) {
                             auto it = live.find(p);
                             ASSERT_NE(it, live.end()) << "freed a pointer it never gave out";
                             used -= it->second;
                             live.erase(it);
                             std::free(p);
                           }};
  }
};

void* const kStreamA = reinterpret_cast<void*>(0x10);
void* const kStreamB = reinterpret_cast<void*>(0x20);

TEST(CachingAllocatorTest, SizeClasses) {
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), 1u << 20);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) + 1), 2u << 20);
  EXPECT_EQ(CachingAllocator::size_class((5 << 20) + 3), 6u << 20);
}

TEST(CachingAllocatorTest, FreedBlockIsReusedOnItsStreamOnly) {
  FakeDevice device{1 << 30};
  CachingAllocator alloc(device.raw());
  void* a = alloc.allocate(1000, kStreamA);
  alloc.deallocate(a);
  EXPECT_EQ(alloc.allocate(600, kStreamA), a) << "same size class, same stream: reused";
  void* b = alloc.allocate(700, kStreamB);
  EXPECT_NE(b, a) << "another stream never gets a block that may still be in use";
  const DeviceMemoryStats s = alloc.stats();
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.num_cache_hits, 1);
  EXPECT_EQ(s.num_device_mallocs, 2);
  EXPECT_EQ(s.allocated_bytes, 2048);
  EXPECT_EQ(s.reserved_bytes, 2048);
  alloc.deallocate(a);
  alloc.deallocate(b);
  alloc.empty_cache();
  EXPECT_TRUE(device.live.empty());
}

TEST(CachingAllocatorTest, StatisticsTrackAllocatedReservedAndPeaks) {
  FakeDevice device{1 << 30};
  CachingAllocator alloc(device.raw());
  void* a = alloc.allocate(3 << 20, kStreamA);  // 4 MiB class
  void* b = alloc.allocate(100, kStreamA);      // 512 B
  alloc.deallocate(a);
  DeviceMemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 512);
  EXPECT_EQ(s.reserved_bytes, (4 << 20) + 512);
  EXPECT_EQ(s.peak_allocated_bytes, (4 << 20) + 512);
  alloc.reset_peak_stats();
  EXPECT_EQ(alloc.stats().peak_allocated_bytes, 512);
  alloc.empty_cache();
  s = alloc.stats();
  EXPECT_EQ(s.reserved_bytes, 512);
  EXPECT_EQ(s.num_device_frees, 1);
  EXPECT_EQ(device.live.size(), 1u);
  alloc.deallocate(b);
}

TEST(CachingAllocatorTest, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeDevice device{6 << 20};
  CachingAllocator alloc(device.raw());
  alloc.deallocate(alloc.allocate(4 << 20, kStreamA));  // 4 MiB cached, 2 MiB left
  void* big = alloc.allocate(5 << 20, kStreamA);        // 6 MiB class: fits only after the retry
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(alloc.stats().num_device_frees, 1);
  EXPECT_EMBER_ERROR(alloc.allocate(1 << 20, kStreamA), "CUDA out of memory",
                     "tried to allocate 1048576 bytes", "6291456 bytes allocated");
  EXPECT_EQ(alloc.stats().num_ooms, 1);
  alloc.deallocate(big);
}

}  // namespace
}  // namespace ember::cuda
