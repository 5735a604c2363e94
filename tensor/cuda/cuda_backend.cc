// The CUDA allocator and DeviceBackend (tensor/device_backend.h), registered at static
// initialisation when this library is linked (alwayslink): a caching allocator per device over
// cudaMalloc/cudaFree, byte copies between host and devices, zero fills, synchronisation, device
// count and memory statistics.
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/current_stream.h"
#include "tensor/device_backend.h"
#include "tensor/storage.h"

namespace ember::cuda {
namespace {

int device_count_once();

CachingAllocator& caching_allocator(int device) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<CachingAllocator>>* per_device =
      new std::vector<std::unique_ptr<CachingAllocator>>;  // outlives static Storage destructors
  std::lock_guard<std::mutex> lock(mutex);
  EMBER_CHECK(device >= 0 && device < device_count_once(), "cuda:", device,
              ": no such device (", device_count_once(), " CUDA devices)");
  if (per_device->size() <= static_cast<size_t>(device)) per_device->resize(device + 1);
  auto& slot = (*per_device)[device];
  if (!slot) {
    RawDeviceMemory raw;
    raw.allocate = [device](size_t bytes) -> void* {
      DeviceGuard guard(device);
      void* p = nullptr;
      const cudaError_t err = cudaMalloc(&p, bytes);
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // out of memory is the allocator's to report, with its statistics
        return nullptr;
      }
      CUDA_CHECK(err, " allocating ", bytes, " bytes on cuda:", device);
      return p;
    };
    raw.free = [device](void* p) {
      DeviceGuard guard(device);
      const cudaError_t err = cudaFree(p);
      // Runs from destructors too, so it must not throw; a failure means the context is already
      // broken (the next checked call reports it), so say so and carry on.
      if (err != cudaSuccess) std::fprintf(stderr, "ember: cudaFree failed: %s\n", cudaGetErrorString(err));
    };
    slot = std::make_unique<CachingAllocator>(std::move(raw));
  }
  return *slot;
}

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    void* p = caching_allocator(device.index).allocate(nbytes, current_stream(device.index));
    std::lock_guard<std::mutex> lock(mutex_);
    owner_[p] = device.index;
    return p;
  }
  void deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    int device;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = owner_.find(ptr);
      device = it->second;
      owner_.erase(it);
    }
    caching_allocator(device).deallocate(ptr);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, int> owner_;  // which device's allocator a pointer came from
};

class CudaBackend final : public DeviceBackend {
 public:
  void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                  size_t nbytes) override {
    if (nbytes == 0) return;
    if (dst_device.is_cuda() && src_device.is_cuda()) {
      if (dst_device.index == src_device.index) {
        DeviceGuard guard(dst_device.index);
        CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice));
      } else {
        CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes),
                   " (", src_device.str(), " -> ", dst_device.str(), ")");
      }
      return;
    }
    // cudaMemcpy to or from pageable host memory returns once the host side is done, so the
    // caller may reuse (or read) its CPU buffer immediately.
    if (dst_device.is_cuda()) {
      DeviceGuard guard(dst_device.index);
      CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
    } else {
      DeviceGuard guard(src_device.index);
      CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
    }
  }

  void synchronize(Device device) override {
    DeviceGuard guard(device.index);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  int device_count() override { return device_count_once(); }

  DeviceMemoryStats memory_stats(int device) override {
    return caching_allocator(device).stats();
  }
  void reset_peak_memory_stats(int device) override {
    caching_allocator(device).reset_peak_stats();
  }
  void empty_cache() override {
    for (int d = 0; d < device_count_once(); ++d) caching_allocator(d).empty_cache();
  }
};

int device_count_once() {
  // Asked once: without a driver (or a GPU) the answer is 0 and never changes in this process.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // e.g. "CUDA driver version is insufficient": no CUDA here, not a bug
      return 0;
    }
    return n;
  }();
  return count;
}

const bool kRegistered = [] {
  static CudaAllocator allocator;
  static CudaBackend backend;
  set_allocator(DeviceType::CUDA, &allocator);
  register_device_backend(DeviceType::CUDA, &backend);
  return true;
}();

}  // namespace
}  // namespace ember::cuda
