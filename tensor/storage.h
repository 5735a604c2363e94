// Storage: a device-tagged block of bytes with shared ownership. Tensors are views over a Storage;
// every view (and DDP's bucket views) shares the same StorageImpl.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace ember {

// One allocator per device type; CPU allocations are 64-byte aligned (a cache line, and AVX-512 wide).
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr) = 0;
};

constexpr size_t kCpuAlignment = 64;

Allocator* get_allocator(DeviceType type);
// The CUDA backend registers its allocator here at startup (tensor/cuda/); nothing else should.
void set_allocator(DeviceType type, Allocator* allocator);

// The bytes themselves, shared by every Storage handle (and so every tensor view) over them: owns
// the pointer and runs its deleter when the last handle goes. Not copyable.
class StorageImpl {
 public:
  using Deleter = std::function<void(void*)>;
  StorageImpl(void* data, size_t nbytes, Device device, Deleter deleter)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}
  ~StorageImpl() {
    if (deleter_ && data_) deleter_(data_);
  }
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
};

// A shared handle to a StorageImpl (PyTorch's c10::Storage): copies share the bytes. A
// default-constructed Storage is undefined: no data, 0 bytes, on the CPU.
class Storage {
 public:
  Storage() = default;
  // Allocates nbytes on the device with that device's allocator.
  Storage(size_t nbytes, Device device);
  // Wraps memory the caller owns; `deleter` (may be empty) runs when the last view goes away.
  static Storage from_blob(void* data, size_t nbytes, Device device,
                           StorageImpl::Deleter deleter = nullptr);

  bool defined() const { return impl_ != nullptr; }
  void* data() const { return impl_ ? impl_->data() : nullptr; }
  size_t nbytes() const { return impl_ ? impl_->nbytes() : 0; }
  Device device() const { return impl_ ? impl_->device() : kCPU; }
  long use_count() const { return impl_.use_count(); }
  bool is_alias_of(const Storage& other) const { return impl_ && impl_ == other.impl_; }
  const StorageImpl* unsafe_impl() const { return impl_.get(); }

 private:
  explicit Storage(std::shared_ptr<StorageImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<StorageImpl> impl_;
};

}  // namespace ember
