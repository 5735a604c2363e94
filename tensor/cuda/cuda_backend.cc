// The CUDA allocator and DeviceBackend (tensor/device_backend.h), registered at static
// initialisation when this library is linked (alwayslink): cudaMalloc/cudaFree on the tensor's
// device, byte copies between host and devices, zero fills, synchronisation and device count.
#include <cstdio>

#include "tensor/cuda/cuda_check.h"
#include "tensor/device_backend.h"
#include "tensor/storage.h"

namespace ember::cuda {
namespace {

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    DeviceGuard guard(device.index);
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, nbytes), " allocating ", nbytes, " bytes on ", device.str());
    return p;
  }
  void deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    // Runs from a Storage destructor, so it must not throw; a failure here means the context is
    // already broken (the next checked call reports it), so say so and carry on.
    const cudaError_t err = cudaFree(ptr);
    if (err != cudaSuccess) {
      std::fprintf(stderr, "ember: cudaFree failed: %s\n", cudaGetErrorString(err));
    }
  }
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

  void fill_zero(void* dst, Device device, size_t nbytes) override {
    if (nbytes == 0) return;
    DeviceGuard guard(device.index);
    CUDA_CHECK(cudaMemset(dst, 0, nbytes));
  }

  void synchronize(Device device) override {
    DeviceGuard guard(device.index);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  int device_count() override {
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
};

const bool kRegistered = [] {
  static CudaAllocator allocator;
  static CudaBackend backend;
  set_allocator(DeviceType::CUDA, &allocator);
  register_device_backend(DeviceType::CUDA, &backend);
  return true;
}();

}  // namespace
}  // namespace ember::cuda
