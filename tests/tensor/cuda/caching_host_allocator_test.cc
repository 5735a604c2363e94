// The pinned host memory cache's bookkeeping over fake memory and events (this suite needs no
// CUDA): size classes, reuse, blocks held back until their copies' events complete (Note [Pinned
// blocks and in-flight copies]), empty_cache, the out-of-memory retry and message, lookups.
// tests/tensor/cuda/stream_memory_test.cc checks the same cache behind pin_memory() on the backend.
#include "tensor/cuda/caching_host_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "tests/common/error_matchers.h"

namespace ember::cuda {
namespace {

// Host memory of `capacity` bytes and events that complete when the test says so.
struct FakeHost {
  size_t capacity;
  size_t used = 0;
  std::map<void*, size_t> live;
  std::map<int*, bool> events;  // event -> completed
  std::set<int*> destroyed;

  RawHostMemory raw() {
    RawHostMemory r;
    r.allocate = [this](size_t bytes) -> void* {
      if (used + bytes > capacity) return nullptr;
      used += bytes;
      void* p = std::malloc(bytes);
      live[p] = bytes;
      return p;
    };
    r.free = [this](void* p) {
      auto it = live.find(p);
      ASSERT_NE(it, live.end()) << "freed a pointer it never gave out";
      used -= it->second;
      live.erase(it);
      std::free(p);
    };
    r.record_event = [this](void*) -> void* {
      int* e = new int(0);
      events[e] = false;
      return e;
    };
    r.event_done = [this](void* e) { return events.at(static_cast<int*>(e)); };
    r.destroy_event = [this](void* e) {
      destroyed.insert(static_cast<int*>(e));
      events.erase(static_cast<int*>(e));
      delete static_cast<int*>(e);
    };
    return r;
  }
  void complete_all() {
    for (auto& [e, done] : events) done = true;
  }
};

void* const kStream = reinterpret_cast<void*>(0x10);

TEST(CachingHostAllocatorTest, SizeClassesArePowersOfTwo) {
  EXPECT_EQ(CachingHostAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingHostAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingHostAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingHostAllocator::size_class((3 << 20) + 1), 4u << 20);
}

TEST(CachingHostAllocatorTest, FreedBlockIsReusedForItsSizeClass) {
  FakeHost host{1 << 30};
  CachingHostAllocator alloc(host.raw());
  EXPECT_EQ(alloc.allocate(0), nullptr);
  void* a = alloc.allocate(3000);
  alloc.deallocate(a);
  EXPECT_EQ(alloc.allocate(2500), a) << "same size class (4096): reused, no cudaHostAlloc";
  void* b = alloc.allocate(5000);
  EXPECT_NE(b, a);
  const DeviceMemoryStats s = alloc.stats();
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.num_cache_hits, 1);
  EXPECT_EQ(s.num_device_mallocs, 2);
  EXPECT_EQ(s.allocated_bytes, 4096 + 8192);
  EXPECT_EQ(s.reserved_bytes, 4096 + 8192);
  alloc.deallocate(a);
  alloc.deallocate(b);
  EXPECT_EQ(alloc.stats().allocated_bytes, 0);
  EXPECT_EQ(alloc.stats().reserved_bytes, 4096 + 8192) << "kept for reuse";
  EXPECT_EQ(alloc.stats().peak_allocated_bytes, 4096 + 8192);
}

TEST(CachingHostAllocatorTest, BlockWithACopyInFlightWaitsForItsEvent) {
  FakeHost host{1 << 30};
  CachingHostAllocator alloc(host.raw());
  void* a = alloc.allocate(1000);
  alloc.record_use(static_cast<char*>(a) + 100, kStream);  // a copy from inside the block
  ASSERT_EQ(host.events.size(), 1u);
  alloc.deallocate(a);
  void* b = alloc.allocate(1000);
  EXPECT_NE(b, a) << "the copy may still read the freed block: it must not be handed out";
  host.complete_all();
  void* c = alloc.allocate(1000);
  EXPECT_EQ(c, a) << "its copy completed: reusable";
  EXPECT_TRUE(host.events.empty()) << "completed events are destroyed";
  EXPECT_EQ(host.destroyed.size(), 1u);
  alloc.deallocate(b);
  alloc.deallocate(c);
}

TEST(CachingHostAllocatorTest, UsesOfUnknownOrFreedPointersAreIgnored) {
  FakeHost host{1 << 30};
  CachingHostAllocator alloc(host.raw());
  int on_stack = 0;
  alloc.record_use(&on_stack, kStream);
  void* a = alloc.allocate(600);
  alloc.record_use(static_cast<char*>(a) + 1024, kStream);  // past its 1024-byte block
  alloc.deallocate(a);
  alloc.record_use(a, kStream);  // cached, not in use
  EXPECT_TRUE(host.events.empty());
}

TEST(CachingHostAllocatorTest, ContainsCoversWholeBlocksInUseOrCached) {
  FakeHost host{1 << 30};
  CachingHostAllocator alloc(host.raw());
  char* a = static_cast<char*>(alloc.allocate(2048));
  EXPECT_TRUE(alloc.contains(a));
  EXPECT_TRUE(alloc.contains(a + 2047));
  EXPECT_FALSE(alloc.contains(a + 2048));
  EXPECT_FALSE(alloc.contains(a - 1));
  alloc.deallocate(a);
  EXPECT_TRUE(alloc.contains(a)) << "cached blocks stay pinned";
  alloc.empty_cache();
  EXPECT_FALSE(alloc.contains(a));
}

TEST(CachingHostAllocatorTest, EmptyCacheKeepsBlocksWithCopiesInFlight) {
  FakeHost host{1 << 30};
  CachingHostAllocator alloc(host.raw());
  void* busy = alloc.allocate(1000);
  void* idle = alloc.allocate(1000);
  alloc.record_use(busy, kStream);
  alloc.deallocate(busy);
  alloc.deallocate(idle);
  alloc.empty_cache();
  EXPECT_EQ(host.live.count(idle), 0u) << "given back";
  EXPECT_EQ(host.live.count(busy), 1u) << "its copy may still touch it";
  EXPECT_EQ(alloc.stats().num_device_frees, 1);
  host.complete_all();
  alloc.empty_cache();
  EXPECT_TRUE(host.live.empty());
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
}

TEST(CachingHostAllocatorTest, OutOfMemoryRetriesAfterGivingBackTheCacheThenNamesTheRequest) {
  FakeHost host{4096};
  CachingHostAllocator alloc(host.raw());
  void* a = alloc.allocate(4096);
  alloc.deallocate(a);
  void* b = alloc.allocate(2048) /* cache holds 4096: given back, then the 2048 fits */;
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(alloc.stats().num_device_frees, 1);
  EXPECT_EMBER_ERROR(alloc.allocate(4096), "pinned host memory: cudaHostAlloc of 4096 bytes",
                   "2048 bytes of pinned memory in use");
  EXPECT_EQ(alloc.stats().num_ooms, 1);
  alloc.deallocate(b);
}

}  // namespace
}  // namespace ember::cuda
