#include "tensor/storage.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace ember {
namespace {

class CpuAllocator final : public Allocator {
 public:
  // malloc plus manual alignment rather than aligned_alloc: glibc's memalign takes a larger block
  // and trims it, so a freed tensor never fits the next request of the same size and every op's
  // output lands on fresh, cache-cold memory (measured in bench/elementwise_bench). Plain malloc
  // hands the same block back, as it does for the plain loops the benchmarks compare against.
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    void* raw = std::malloc(nbytes + kCpuAlignment);
    EMBER_CHECK(raw != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    // malloc aligns to 16, so there are at least 16 bytes before `aligned` to remember `raw` in.
    const uintptr_t aligned =
        (reinterpret_cast<uintptr_t>(raw) + kCpuAlignment) & ~uintptr_t{kCpuAlignment - 1};
    reinterpret_cast<void**>(aligned)[-1] = raw;
    return reinterpret_cast<void*>(aligned);
  }
  void deallocate(void* ptr) override {
    if (ptr) std::free(static_cast<void**>(ptr)[-1]);
  }
};

Allocator* g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) {
  static CpuAllocator cpu;
  if (type == DeviceType::CPU) return &cpu;
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
