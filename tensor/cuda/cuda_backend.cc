// The CUDA allocator and DeviceBackend (tensor/device_backend.h), registered at static
// initialisation when this library is linked (alwayslink): a caching allocator per device over
// cudaMalloc/cudaFree, byte copies between host and devices, zero fills, synchronisation, device
// count and memory statistics.
#include <cstdio>
#include <map>
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
      if (err != cudaSuccess) {
      std::fprintf(stderr, "ember: cudaFree failed: %s\n", cudaGetErrorString(err));
    }
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
                  size_t nbytes, bool non_blocking) override {
    if (nbytes == 0) return;
    if (dst_device.is_cuda() && src_device.is_cuda()) {
      DeviceGuard guard(dst_device.index);
      if (dst_device.index == src_device.index) {
        // Queued on the current stream, after the kernels that produced src.
        CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice,
                                   cuda::current_stream(dst_device.index)));
        if (!non_blocking) {
          CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream(dst_device.index)));
        }
      } else {
        CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes),
                   " (", src_device.str(), " -> ", dst_device.str(), ")");
      }
      return;
    }
    const bool to_device = dst_device.is_cuda();
    const int index = to_device ? dst_device.index : src_device.index;
    DeviceGuard guard(index);
    const cudaStream_t stream = cuda::current_stream(index);
    const cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    // Ordered after the work already queued on the current stream. Only a copy to or from pinned
    // memory may be left running; pageable memory is copied before returning, so the caller may
    // reuse (or read) its CPU buffer at once.
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream));
    if (!(non_blocking && is_pinned(to_device ? src : dst))) {
      CUDA_CHECK(cudaStreamSynchronize(stream));
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

  void* allocate_pinned(size_t nbytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, nbytes), " allocating ", nbytes, " bytes of pinned host memory");
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    pinned_[reinterpret_cast<uintptr_t>(p)] = nbytes;
    return p;
  }
  void free_pinned(void* ptr) override {
    if (ptr == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(pinned_mutex_);
      pinned_.erase(reinterpret_cast<uintptr_t>(ptr));
    }
    // cudaFreeHost waits for the device, so a copy still reading the buffer finishes first.
    const cudaError_t err = cudaFreeHost(ptr);
    if (err != cudaSuccess) {
      std::fprintf(stderr, "ember: cudaFreeHost failed: %s\n", cudaGetErrorString(err));
    }
  }
  bool is_pinned(const void* ptr) override {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    auto it = pinned_.upper_bound(p);
    if (it == pinned_.begin()) return false;
    --it;
    return p < it->first + it->second;
  }

  void* create_stream(int device) override {
    DeviceGuard guard(device);
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), " on cuda:", device);
    return s;
  }
  void destroy_stream(void* stream) override {
    if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
  void* current_stream(int device) override { return cuda::current_stream(device); }
  void set_current_stream(int device, void* stream) override {
    set_current_cuda_stream(device, static_cast<cudaStream_t>(stream));
  }
  void synchronize_stream(void* stream) override {
    CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  }
  void* create_event(bool timing) override {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  void destroy_event(void* event) override {
    if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  void record_event(void* event, void* stream) override {
    CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }
  void stream_wait_event(void* stream, void* event) override {
    CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                   static_cast<cudaEvent_t>(event), 0));
  }
  void synchronize_event(void* event) override {
    CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }
  float event_elapsed_ms(void* start, void* end) override {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start),
                                    static_cast<cudaEvent_t>(end)));
    return ms;
  }

 private:
  std::mutex pinned_mutex_;
  std::map<uintptr_t, size_t> pinned_;  // live cudaMallocHost blocks: start -> bytes
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
