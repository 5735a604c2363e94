#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace ember {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    // aligned_alloc needs a size that is a multiple of the alignment.
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    EMBER_CHECK(p != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    return p;
  }
  void deallocate(void* ptr) override { std::free(ptr); }
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
