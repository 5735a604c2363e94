// The CUDA allocator and DeviceBackend (tensor/device_backend.h), registered at static
// initialisation when this library is linked (alwayslink): a caching allocator per device over
// cudaMalloc/cudaFree, a cache of pinned host blocks over cudaHostAlloc/cudaFreeHost, byte copies between host and devices, zero fills, synchronisation, device
// count and memory statistics.
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/caching_host_allocator.h"
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
#ifdef EMBER_CUDA_SIMULATOR
    // Each tensor's own bytes, not its block's, are what the sanitizer lets kernels touch.
    raw.handed_out = [](void* p, size_t bytes, void* stream) {
      cudasim::annotate_suballocation(p, bytes, static_cast<cudaStream_t>(stream));
    };
    raw.taken_back = [](void* p, size_t block_bytes, void* stream) {
      cudasim::annotate_suballocation_free(p, block_bytes, static_cast<cudaStream_t>(stream));
    };
#endif
    slot = std::make_unique<CachingAllocator>(std::move(raw));
  }
  return *slot;
}

CachingHostAllocator& host_allocator() {
  static CachingHostAllocator* cache = new CachingHostAllocator(RawHostMemory{
      [](size_t bytes) -> void* {
        void* p = nullptr;
        const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
        if (err == cudaErrorMemoryAllocation) {
          cudaGetLastError();  // the cache reports it, with its statistics
          return nullptr;
        }
        CUDA_CHECK(err, " allocating ", bytes, " bytes of pinned host memory");
        return p;
      },
      [](void* p) {
        const cudaError_t err = cudaFreeHost(p);
        if (err != cudaSuccess) {
          std::fprintf(stderr, "ember: cudaFreeHost failed: %s\n", cudaGetErrorString(err));
        }
      },
      [](void* stream) -> void* {
        cudaEvent_t e = nullptr;
        CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
        return e;
      },
      [](void* event) {
        const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
        if (err == cudaErrorNotReady) {
          cudaGetLastError();
          return false;
        }
        CUDA_CHECK(err, " (a copy to or from pinned host memory)");
        return true;
      },
      [](void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); },
  });  // outlives static tensors, as the device allocators do
  return *cache;
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
    const void* host = to_device ? src : dst;
    if (non_blocking && host_allocator().contains(host)) {
      host_allocator().record_use(host, stream);  // Note [Pinned blocks and in-flight copies]
    } else {
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

  void* allocate_pinned(size_t nbytes) override { return host_allocator().allocate(nbytes); }
  void free_pinned(void* ptr) override { host_allocator().deallocate(ptr); }
  bool is_pinned(const void* ptr) override { return host_allocator().contains(ptr); }
  DeviceMemoryStats host_memory_stats() override { return host_allocator().stats(); }
  void host_empty_cache() override { host_allocator().empty_cache(); }

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
  set_allocator(DeviceType::kCUDA, &allocator);
  register_device_backend(DeviceType::kCUDA, &backend);
  return true;
}();

}  // namespace
}  // namespace ember::cuda
