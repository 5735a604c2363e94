// Storage: 64-byte aligned CPU allocations, shared ownership between views, caller-owned memory.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::values;

TEST(StorageTest, CpuAllocationsAre64ByteAligned) {
  for (size_t nbytes : {1u, 3u, 63u, 64u, 65u, 1000u, 4097u}) {
    Storage s(nbytes, kCPU);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % kCpuAlignment, 0u) << nbytes;
    EXPECT_EQ(s.nbytes(), nbytes);
    EXPECT_EQ(s.device(), kCPU);
  }
  // Tensors of every dtype start on an aligned address too.
  for (ScalarType dt : testing::all_dtypes()) {
    Tensor t = empty({7}, dt);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << dt;
  }
}

// The arena and glibc's heap are what these tests look at: Linux with glibc's own malloc only (a
// sanitizer brings its own, and the arena is off under them).
#if defined(__GLIBC__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define EMBER_GLIBC_HEAP_TESTS 1
#endif

#if defined(EMBER_GLIBC_HEAP_TESTS)
// The VmFlags of the mapping holding p, from /proc/self/smaps ("" when none holds it).
std::string mapping_flags(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &begin, &end) == 2 &&
        line.find(' ') > line.find('-')) {
      inside = a >= begin && a < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}
bool huge_page_advised(const void* p) { return mapping_flags(p).find(" hg") != std::string::npos; }
#endif

// Note [Huge-page arena]: large blocks come from one mapping advised for huge pages, not from
// malloc (which would have mmap'd the 40 MiB one).
TEST(StorageTest, LargeBlocksComeFromTheHugePageArena) {
#if !defined(EMBER_GLIBC_HEAP_TESTS)
  GTEST_SKIP() << "Linux with glibc's own malloc only (a sanitizer brings its own)";
#else
  Storage first(1, kCPU);  // the allocator is set up
  EXPECT_FALSE(huge_page_advised(first.data())) << "a small block is malloc's";
  const size_t mapped_before = mallinfo2().hblks;
  std::vector<Storage> blocks;
  for (size_t mib : {1u, 4u, 16u, 40u}) {
    blocks.emplace_back(mib << 20, kCPU);
    const void* p = blocks.back().data();
    EXPECT_TRUE(huge_page_advised(p)) << mib << " MiB: " << mapping_flags(p);
  }
  EXPECT_EQ(mallinfo2().hblks, mapped_before);
#endif
}

// Note [CPU allocator], Note [Huge-page arena]: once the arena's 1 GiB is taken, large blocks come
// from glibc's heap, not a mapping each, up to 32 MiB; freed arena blocks past the cache's idle cap
// lose their pages but are handed out again.
TEST(StorageTest, PastTheArenaLargeBlocksComeFromTheHeap) {
#if !defined(EMBER_GLIBC_HEAP_TESTS)
  GTEST_SKIP() << "Linux with glibc's own malloc only (a sanitizer brings its own)";
#else
  // Address space only: nothing below writes these blocks, so they take no memory.
  std::vector<Storage> blocks;
  while (blocks.size() < 80) {
    blocks.emplace_back(size_t{16} << 20, kCPU);
    if (!huge_page_advised(blocks.back().data())) break;
  }
  ASSERT_FALSE(huge_page_advised(blocks.back().data())) << "the arena held 80 blocks of 16 MiB";
  const size_t mapped_before = mallinfo2().hblks;
  blocks.emplace_back(size_t{5} << 20, kCPU);  // a size the cache has not seen
  EXPECT_EQ(mallinfo2().hblks, mapped_before) << "a 5 MiB block was mmap'd";
  blocks.emplace_back(size_t{48} << 20, kCPU);  // above glibc's ceiling: a mapping of its own
  EXPECT_EQ(mallinfo2().hblks, mapped_before + 1);
  // 1 GiB freed: past the 512 MiB cap the arena's blocks go cold, and come back.
  std::vector<const void*> arena_blocks;
  for (const Storage& s : blocks) {
    if (s.nbytes() == (size_t{16} << 20) && huge_page_advised(s.data())) {
      arena_blocks.push_back(s.data());
    }
  }
  blocks.clear();
  std::vector<Storage> again;
  for (size_t i = 0; i < arena_blocks.size() + 8; ++i) again.emplace_back(size_t{16} << 20, kCPU);
  for (const void* p : arena_blocks) {
    bool reused = false;
    for (const Storage& s : again) reused = reused || s.data() == p;
    EXPECT_TRUE(reused) << p << " of " << arena_blocks.size();
  }
  std::memset(again.back().data(), 1, size_t{16} << 20);  // cold or not, it is memory
#endif
}

// Note [When malloc fails]: a request no memory can hold gets a clear error, and the allocator
// goes on putting large blocks on the heap (the failed retry from a mapping restores the threshold).
TEST(StorageTest, ARequestNoMemoryCanHoldThrowsAndTheHeapStaysInUse) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Without glibc there is no mallinfo2 to see where blocks come from; ASan and TSan abort on a
  // 1 PiB request instead of returning null (allocator_may_return_null=0).
  GTEST_SKIP() << "needs glibc's own malloc: a sanitizer aborts on a request this large";
#else
  { Storage cached(size_t{4} << 20, kCPU); }  // freed into the cache, which the failure empties
  EXPECT_EMBER_ERROR(Storage(size_t{1} << 50, kCPU), "CPU allocator: out of memory",
                     "1125899906842624 bytes", "every cached block");
  const size_t mapped_before = mallinfo2().hblks;
  Storage after(size_t{4} << 20, kCPU);
  EXPECT_EQ(mallinfo2().hblks, mapped_before) << "a 4 MiB block was mmap'd after the failure";
#endif
}

TEST(StorageTest, ZeroBytesHasNoData) {
  Storage s(0, kCPU);
  EXPECT_TRUE(s.defined());
  EXPECT_EQ(s.nbytes(), 0u);
  Tensor t = empty({0, 3});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
}

TEST(StorageTest, DefaultStorageIsUndefined) {
  Storage s;
  EXPECT_FALSE(s.defined());
  EXPECT_EQ(s.data(), nullptr);
  EXPECT_EQ(s.nbytes(), 0u);
  EXPECT_FALSE(s.is_alias_of(s));  // an undefined storage aliases nothing, not even itself
}

TEST(StorageTest, CopiesAndViewsShareOneStorage) {
  Tensor a = zeros({4});
  const long before = a.storage().use_count();
  Tensor b = a;           // handle copy
  Tensor v = a.view({2, 2});  // view
  EXPECT_EQ(a.storage().use_count(), before + 1);  // b shares the impl; v holds the storage
  EXPECT_TRUE(a.storage().is_alias_of(v.storage()));
  EXPECT_EQ(a.storage().unsafe_impl(), v.storage().unsafe_impl());
  v.fill_(5);
  EXPECT_EQ(values(a), (std::vector<double>{5, 5, 5, 5}));
  EXPECT_EQ(values(b), (std::vector<double>{5, 5, 5, 5}));
  // A clone gets its own storage.
  Tensor c = a.clone();
  EXPECT_FALSE(c.storage().is_alias_of(a.storage()));
}

TEST(StorageTest, StorageOutlivesTheTensorThatMadeIt) {
  Tensor v;
  {
    Tensor a = testing::iota({4});
    v = a.narrow(0, 1, 2);
  }
  EXPECT_EQ(values(v), (std::vector<double>{1, 2}));
}

TEST(StorageTest, FromBlobRunsDeleterOnceWhenLastViewDies) {
  int calls = 0;
  float buf[6] = {0, 1, 2, 3, 4, 5};
  void* seen = nullptr;
  {
    Tensor t = from_blob(buf, {2, 3}, kFloat32, [&](void* p) {
      ++calls;
      seen = p;
    });
    EXPECT_EQ(t.data_ptr(), static_cast<void*>(buf));  // no copy
    EXPECT_EQ(t.storage().nbytes(), sizeof buf);
    Tensor v = t.t();
    t = Tensor();
    EXPECT_EQ(calls, 0);  // v still holds the storage
    EXPECT_EQ(values(v), (std::vector<double>{0, 3, 1, 4, 2, 5}));
    buf[0] = 42;  // writes through to the tensor
    EXPECT_EQ(v[0][0].item<float>(), 42);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, static_cast<void*>(buf));
}

TEST(StorageTest, FromBlobWithoutDeleterAndWithStrides) {
  double buf[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  Tensor t = from_blob(buf, {2, 2}, {4, 2}, kFloat64);
  EXPECT_EQ(values(t), (std::vector<double>{0, 2, 4, 6}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.storage().nbytes(), 7 * sizeof(double));  // up to the last reachable element
  t.mul_(2);
  EXPECT_EQ(buf[6], 12);
  EXPECT_EQ(buf[1], 1);  // untouched between the strided elements
}

TEST(StorageTest, FromBlobErrors) {
  EXPECT_EMBER_ERROR(from_blob(nullptr, {2}, kFloat32), "from_blob", "null", "[2]");
  EXPECT_EMBER_ERROR(from_blob(nullptr, {2, -1}, kFloat32), "from_blob", "negative", "[2, -1]");
  float x = 0;
  EXPECT_EMBER_ERROR(from_blob(&x, {1, 1}, {1}, kFloat32), "from_blob", "[1, 1]", "[1]");
  // A zero-size blob may be null.
  EXPECT_EQ(from_blob(nullptr, {0}, kFloat32).numel(), 0);
}

TEST(StorageTest, NoCudaAllocatorWithoutCudaBuild) {
  bool registered = true;
  try {
    get_allocator(DeviceType::kCUDA);
  } catch (const Error&) {
    registered = false;
  }
  if (registered) GTEST_SKIP() << "built with CUDA";
  EXPECT_EMBER_ERROR(Storage(16, Device(DeviceType::kCUDA, 0)), "no allocator", "cuda",
                     "--config=cuda");
  EXPECT_EMBER_ERROR(empty({2}, TensorOptions(kFloat32, Device(DeviceType::kCUDA, 0))),
                     "no allocator", "cuda");
}

}  // namespace
}  // namespace ember
