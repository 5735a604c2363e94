#include "tensor/storage.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "tensor/error.h"

namespace ember {
namespace {

// Note [CPU allocator]
// Blocks are malloc'd with room to align by hand, not aligned_alloc'd: glibc's memalign takes a
// larger block and trims it, so a freed tensor never fitted the next request of the same size and
// every op's output landed on fresh, cache-cold memory. Large blocks (>= 64 KiB) are also kept on
// free for the next request of the same size, up to 512 MiB idle: glibc otherwise returns them to
// the kernel (mmap'd above 32 MiB, trimmed off the heap top below), and each reuse pays a page fault
// per 4 KiB plus zeroing -- a 512^3 matmul ran at 0.7x raw Eigen and a 32 MiB to(float64) at 0.13x
// a plain loop (bench/). Training allocates the same sizes every step, so the cache hits. Under
// AddressSanitizer nothing is cached, so use-after-free stays detectable.
//
// Large blocks now come first from the arena of Note [Huge-page arena]; what follows is how
// malloc serves them once the arena is full (or cannot be mapped).
// Because the cache never frees a large block, glibc never raises its mmap threshold (it does so
// when an mmap'd block is freed, up to 32 MiB), and every block above 128 KiB stayed a mapping of
// its own. The allocator sets that threshold to glibc's ceiling, 32 MiB, so large blocks come from
// the heap as in a process that freed them (until the heap cannot grow: Note [When malloc fails]).
// That makes 2-thread ResNet-20 steps faster where the cores are shared with other tenants, and
// changes nothing on a quiet machine or at 1 thread (`bench/resnet_bench.sh`; docs/measurements.md,
// "CPU allocator"). Why separate mappings (page-aligned, at 12 offsets) cost two threads sharing
// their cores with other tenants is inferred (cache-set and 4K-alias conflicts between the planes
// they stream), not proved.
//
// Note [Huge-page arena]
// Large blocks come first from one mapping advised for transparent huge pages (MADV_HUGEPAGE;
// Debian's kernels give THP on advice only), cut in order like the heap: the activations and
// Winograd buffers a step streams through then take a TLB entry per 2 MiB instead of per 4 KiB,
// which makes a 1-thread ResNet-20 step a few percent faster for a little more peak RSS
// (`bench/resnet_bench.sh`; docs/measurements.md, "CPU allocator", also for glibc's
// glibc.malloc.hugetlb=1 tunable, which advises its heap the same way). The heap cannot be advised
// from here: glibc touches each extension (the top chunk's header) before malloc returns, the
// touched range gets small pages and its own anonymous-memory record, and most of the heap stays
// in small pages. Blocks never go back to the arena: the cache keeps them, and those past its idle
// cap give their pages back to the kernel (MADV_DONTNEED) and wait, cold, for a request of their
// size. When the arena is full, or mmap fails, blocks come from malloc as above.
class HugePageArena {
 public:
  HugePageArena() : base_(reserve()) {}

  // Whole cache lines of the reservation, or nullptr when it is full or could not be made.
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (base_ == nullptr || size > kBytes - used_) return nullptr;
    void* p = base_ + used_;
    used_ += (size + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    return p;
  }
  bool contains(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return base_ != nullptr && c >= base_ && c < base_ + kBytes;
  }
  // The whole pages inside [begin, end) back to the kernel; they read as zeros when next touched.
  static void release(const void* begin_at, const void* end_at) {
#if defined(__linux__)
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(begin_at) + 4095) & ~uintptr_t{4095};
    const uintptr_t end = reinterpret_cast<uintptr_t>(end_at) & ~uintptr_t{4095};
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
    (void)begin_at;
    (void)end_at;
#endif
  }

 private:
  // The reservation's start, or nullptr where there is none (no Linux, a sanitizer, mmap failed).
  static char* reserve() {
#if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
    // Address space only (MAP_NORESERVE): pages are the kernel's when first touched. 2 MiB more
    // than used, so that the arena can start on a huge-page boundary.
    void* m = mmap(nullptr, kBytes + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const uintptr_t start = (reinterpret_cast<uintptr_t>(m) + kHugePage - 1) & ~(kHugePage - 1);
    madvise(reinterpret_cast<void*>(start), kBytes, MADV_HUGEPAGE);  // a hint: may fail harmlessly
    return reinterpret_cast<char*>(start);
#else
    return nullptr;
#endif
  }

  static constexpr size_t kBytes = size_t{1} << 30;
  static constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  char* const base_;  // set once, at construction: contains() reads it unlocked
  std::mutex mu_;     // guards used_
  size_t used_ = 0;
};

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, kGlibcMmapThresholdMax);
#endif
  }
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    const size_t size = block_size(nbytes);
    if (size >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(size);
      if (it != cache_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= size;
        return p;
      }
      auto cold = cold_.find(size);  // Note [Huge-page arena]
      if (cold != cold_.end() && !cold->second.empty()) {
        void* p = cold->second.back();
        cold->second.pop_back();
        return p;
      }
    }
    void* raw = size >= kCacheMinBytes ? arena_.take(size) : nullptr;
    if (raw == nullptr) raw = std::malloc(size);
    if (raw == nullptr) raw = malloc_after_failure(size);  // Note [When malloc fails]
    EMBER_CHECK(raw != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes (",
                size, " with its header), after returning every cached block to malloc");
    // malloc aligns to 16, so `aligned` is 16..64 bytes in: room for the header below. Large
    // blocks start at staggered cache lines: mmap'd ones would all sit at the same offset in a
    // page, and out[i] = a[i] * b[i] over three such buffers hits 4K aliasing (measured: 3x slower).
    uintptr_t aligned =
        (reinterpret_cast<uintptr_t>(raw) + kCpuAlignment) & ~uintptr_t{kCpuAlignment - 1};
    if (size >= kCacheMinBytes) {
      aligned += (stagger_.fetch_add(1, std::memory_order_relaxed) % kStaggerSlots) * kStaggerStep;
    }
    Header* h = reinterpret_cast<Header*>(aligned) - 1;
    h->raw = raw;
    h->size = size;
    return reinterpret_cast<void*>(aligned);
  }

  void deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    const Header* h = header_of(ptr);
    if (h->size >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_bytes_ + h->size <= kCacheMaxBytes) {
        cache_[h->size].push_back(ptr);
        cached_bytes_ += h->size;
        return;
      }
      retire_locked(ptr);
      return;
    }
    std::free(h->raw);
  }

 private:
  struct Header {
    void* raw;    // what malloc or the arena returned
    size_t size;  // bytes malloc'd, the cache key
  };
  static const Header* header_of(const void* ptr) { return static_cast<const Header*>(ptr) - 1; }
  // A large block the cache does not keep: back to malloc, or, from the arena (which cannot take
  // it back), its pages after the one holding its header go back to the kernel and it waits cold
  // (Note [Huge-page arena]). Callers hold mu_.
  void retire_locked(void* ptr) {
    const Header* h = header_of(ptr);
    if (!arena_.contains(h->raw)) {
      std::free(h->raw);
      return;
    }
    HugePageArena::release(ptr, static_cast<const char*>(h->raw) + h->size);
    cold_[h->size].push_back(ptr);
  }
#if defined(__SANITIZE_ADDRESS__)
  static constexpr size_t kCacheMinBytes = SIZE_MAX;
#else
  static constexpr size_t kCacheMinBytes = size_t{64} << 10;
#endif
  static constexpr size_t kCacheMaxBytes = size_t{512} << 20;
  static constexpr int kGlibcMmapThresholdMax = 32 << 20;  // DEFAULT_MMAP_THRESHOLD_MAX, 64-bit
  static constexpr int kGlibcMmapThresholdDefault = 128 << 10;
  static constexpr size_t kStaggerSlots = 12;
  static constexpr size_t kStaggerStep = 5 * kCpuAlignment;  // 12 x 320 B spread over a 4 KiB page

  // Note [When malloc fails]
  // The raised mmap threshold puts large blocks on the heap, and a heap can stop growing while
  // memory is left: valgrind gives it a fixed segment, where glibc's own fallback to mmap failed a
  // 1.6 MB request of ResNet-20's first step. So a failed request is first tried as a mapping of its
  // own, and when that works, large blocks are mapped from then on (glibc's default). When it fails
  // too, every cached block goes back to malloc before the last try, as PyTorch's caching
  // allocators do before they report out of memory.
  void* malloc_after_failure(size_t size) {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, kGlibcMmapThresholdDefault);
    if (void* raw = std::malloc(size)) return raw;
    mallopt(M_MMAP_THRESHOLD, kGlibcMmapThresholdMax);
#endif
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
    return std::malloc(size);
  }

  // Every cached block back to malloc (arena blocks: cold). Callers hold mu_.
  void release_cached_locked() {
    for (const auto& entry : cache_) {
      for (void* p : entry.second) retire_locked(p);
    }
    cache_.clear();
    cached_bytes_ = 0;
  }

  // Large sizes are rounded to whole pages so near-equal requests share a cache entry.
  static size_t block_size(size_t nbytes) {
    const size_t size = nbytes + kCpuAlignment;
    if (size < kCacheMinBytes) return size;
    return (size + kStaggerSlots * kStaggerStep + 4095) / 4096 * 4096;
  }

  std::atomic<size_t> stagger_{0};
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> cache_;
  std::unordered_map<size_t, std::vector<void*>> cold_;  // arena blocks without their pages
  HugePageArena arena_;
  size_t cached_bytes_ = 0;
};

Allocator* g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) {
  // Never destroyed: tensors freed during static destruction still deallocate through it.
  static CpuAllocator* cpu = new CpuAllocator;
  if (type == DeviceType::kCPU) return cpu;
  Allocator* a = g_allocators[static_cast<int>(type)];
  EMBER_CHECK(a != nullptr, "no allocator for device type cuda: ember was built without CUDA ",
              "(build with --config=cuda)");
  return a;
}

void set_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

Storage::Storage(size_t nbytes, Device device) {
  Allocator* a = get_allocator(device.type);
  void* p = a->allocate(nbytes, device);
  impl_ = std::make_shared<StorageImpl>(p, nbytes, device, [a](void* q) { a->deallocate(q); });
}

Storage Storage::from_blob(void* data, size_t nbytes, Device device, StorageImpl::Deleter deleter) {
  return Storage(std::make_shared<StorageImpl>(data, nbytes, device, std::move(deleter)));
}

}  // namespace ember
