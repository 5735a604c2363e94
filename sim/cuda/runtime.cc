// The CUDA simulator's runtime API: errors, devices, "device" memory (host memory the simulator
// tracks, so a copy in the wrong direction or past an allocation's end fails as it would on a GPU,
// and that host code cannot touch: device_memory.cc), and streams, whose work runs on their own
// threads (streams.cc, Note [Simulated streams]; events: events.cc).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "sim/cuda/checks.h"
#include "sim/cuda/state.h"

namespace ember::cudasim {
namespace {

constexpr size_t kDeviceAlignment = 256;  // cudaMalloc's guarantee
constexpr int kDeviceCount = 1;

thread_local cudaError_t g_last_error = cudaSuccess;
thread_local std::string g_last_detail;
thread_local int g_current_device = 0;

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, size_t> device;  // start -> bytes, live cudaMalloc allocations
  std::map<uintptr_t, size_t> pinned;  // start -> bytes, live cudaMallocHost allocations
  std::set<cudaStream_t> streams;
  size_t device_bytes = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // outlives static destructors that free device memory
  return *r;
}

// EMBER_CUDASIM_MEMORY_BYTES caps the simulated device (default 16 GiB), so out-of-memory paths
// can be tested.
size_t device_capacity() {
  static const size_t capacity = [] {
    const char* env = std::getenv("EMBER_CUDASIM_MEMORY_BYTES");
    return env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : size_t{16} << 30;
  }();
  return capacity;
}

size_t rounded_size(size_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

// Whether [ptr, ptr + bytes) lies inside one of `allocations` (start -> bytes).
bool inside_one(const std::map<uintptr_t, size_t>& allocations, const void* ptr, size_t bytes) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}

bool in_device_range_locked(Registry& r, const void* ptr, size_t bytes) { return inside_one(r.device, ptr, bytes); }

bool is_pinned_pointer(const void* ptr) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return inside_one(r.pinned, ptr, 1);
}

bool is_device_pointer(const void* ptr) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return in_device_range_locked(r, ptr, 1);
}

std::string pointer_str(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

cudaError_t check_device_range(const char* call, const char* what, const void* ptr, size_t bytes) {
  if (bytes == 0 || is_device_range(ptr, bytes)) return cudaSuccess;
  return fail(cudaErrorInvalidValue, std::string(call) + ": " + what + " " + pointer_str(ptr) +
                                         " + " + std::to_string(bytes) +
                                         " bytes is not inside one device allocation");
}

cudaError_t check_host_pointer(const char* call, const char* what, const void* ptr) {
  if (!is_device_pointer(ptr)) return cudaSuccess;
  return fail(cudaErrorInvalidValue, std::string(call) + ": " + what + " " + pointer_str(ptr) +
                                         " is device memory, but the copy kind says host");
}

}  // namespace

cudaError_t fail(cudaError_t error, const std::string& detail) {
  g_last_error = error;
  g_last_detail = detail;
  std::fprintf(stderr, "cudasim: %s: %s\n", cudaGetErrorName(error), detail.c_str());
  return error;
}

cudaError_t set_last_error(cudaError_t error) {
  g_last_error = error;
  return error;
}

const char* last_error_detail() { return g_last_detail.c_str(); }

bool is_live_stream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.streams.count(stream) != 0;
}

bool is_device_range(const void* ptr, size_t bytes) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return in_device_range_locked(r, ptr, bytes);
}

}  // namespace ember::cudasim

using ember::cudasim::fail;

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = ember::cudasim::g_last_error;
  ember::cudasim::g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return ember::cudasim::g_last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: null count");
  *count = ember::cudasim::kDeviceCount;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDevice: null device");
  *device = ember::cudasim::g_current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= ember::cudasim::kDeviceCount) {
    return fail(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(device) +
                                            "): the simulator has " +
                                            std::to_string(ember::cudasim::kDeviceCount) +
                                            " device");
  }
  ember::cudasim::g_current_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return ember::cudasim::synchronize_device("cudaDeviceSynchronize"); }

cudaError_t cudaDeviceCanAccessPeer(int* can_access, int, int) {
  if (can_access == nullptr) return fail(cudaErrorInvalidValue, "cudaDeviceCanAccessPeer: null");
  *can_access = 0;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  using namespace ember::cudasim;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (size > device_capacity() - r.device_bytes) {
      return fail(cudaErrorMemoryAllocation,
                  "cudaMalloc(" + std::to_string(size) + "): " + std::to_string(r.device_bytes) +
                      " of " + std::to_string(device_capacity()) + " simulated bytes in use");
    }
  }
  void* p = device_allocate(rounded_size(size), device_capacity());
  if (p == nullptr) return fail(cudaErrorMemoryAllocation, "cudaMalloc: the simulated device's arena is full");
  std::lock_guard<std::mutex> lock(r.mutex);
  r.device[reinterpret_cast<uintptr_t>(p)] = size;
  r.device_bytes += size;
  shadow_on_malloc(p, size, rounded_size(size));
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  using namespace ember::cudasim;
  if (ptr == nullptr) return cudaSuccess;
  synchronize_device("cudaFree");  // as on a GPU: no stream may still use what is freed
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.device.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.device.end()) {
      return fail(cudaErrorInvalidValue,
                  "cudaFree(" + pointer_str(ptr) + "): not the start of a live device allocation");
    }
    r.device_bytes -= it->second;
    shadow_on_free(ptr, rounded_size(it->second));
    device_free(ptr, rounded_size(it->second));
    r.device.erase(it);
  }
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  using namespace ember::cudasim;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue, "cudaMallocHost: null result pointer");
  *ptr = size == 0 ? nullptr : std::aligned_alloc(kDeviceAlignment, rounded_size(size));
  if (size != 0 && *ptr == nullptr) return fail(cudaErrorMemoryAllocation, "cudaMallocHost");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (*ptr) r.pinned[reinterpret_cast<uintptr_t>(*ptr)] = size;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
  using namespace ember::cudasim;
  if (ptr == nullptr) return cudaSuccess;
  synchronize_device("cudaFreeHost");
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.pinned.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
      return fail(cudaErrorInvalidValue,
                  "cudaFreeHost(" + pointer_str(ptr) + "): not a live pinned allocation");
    }
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  using namespace ember::cudasim;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (free_bytes) *free_bytes = device_capacity() - r.device_bytes;
  if (total_bytes) *total_bytes = device_capacity();
  return cudaSuccess;
}

namespace {

// The checks every copy makes; resolves cudaMemcpyDefault into `kind`.
cudaError_t check_copy(const char* call, void* dst, const void* src, size_t count, cudaMemcpyKind& kind) {
  using namespace ember::cudasim;
  if (kind == cudaMemcpyDefault) {
    kind = is_device_pointer(src) ? (is_device_pointer(dst) ? cudaMemcpyDeviceToDevice
                                                            : cudaMemcpyDeviceToHost)
                                  : (is_device_pointer(dst) ? cudaMemcpyHostToDevice
                                                            : cudaMemcpyHostToHost);
  }
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return fail(cudaErrorInvalidMemcpyDirection, std::string(call) + ": kind " + std::to_string(kind));
  }
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  cudaError_t e = dst_device ? check_device_range(call, "destination", dst, count)
                             : check_host_pointer(call, "destination", dst);
  if (e != cudaSuccess) return e;
  return src_device ? check_device_range(call, "source", src, count)
                    : check_host_pointer(call, "source", src);
}

// The copy, and what it tells the sanitizer's shadow: a device destination is written, and a
// device-to-device copy carries its source's written bytes.
ember::cudasim::StreamWork copy_work(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return [dst, src, count, kind] {
    using namespace ember::cudasim;
    DeviceAccess access;
    std::memmove(dst, src, count);
    if (kind == cudaMemcpyHostToDevice) shadow_on_write(dst, count);
    if (kind == cudaMemcpyDeviceToDevice) shadow_on_device_copy(dst, src, count);
    return std::string();
  };
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  using namespace ember::cudasim;
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_copy("cudaMemcpy", dst, src, count, kind)) return e;
  // On stream 0, so after every blocking stream's earlier work; the host waits for it.
  wait_for_ticket(stream_worker(nullptr), enqueue(nullptr, copy_work(dst, src, count, kind)));
  return report_stream_error("cudaMemcpy", nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  using namespace ember::cudasim;
  if (!is_live_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync: stream is not live");
  }
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, count, kind)) return e;
  const bool pageable = (kind == cudaMemcpyHostToDevice && !is_pinned_pointer(src)) ||
                        (kind == cudaMemcpyDeviceToHost && !is_pinned_pointer(dst)) ||
                        kind == cudaMemcpyHostToHost;
  if (!pageable) {
    enqueue(stream, copy_work(dst, src, count, kind));
    return cudaSuccess;
  }
  // Pageable host memory: synchronous, after the stream's earlier work (CUDA may do either).
  if (cudaError_t e = synchronize_stream("cudaMemcpyAsync", stream)) return e;
  copy_work(dst, src, count, kind)();
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                           size_t count) {
  if (dst_device != 0 || src_device != 0) {
    return fail(cudaErrorInvalidDevice, "cudaMemcpyPeer: the simulator has one device");
  }
  return cudaMemcpy(dst, src, count, cudaMemcpyDeviceToDevice);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  using namespace ember::cudasim;
  if (!is_live_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync: stream is not live");
  }
  const cudaError_t e = check_device_range("cudaMemset", "pointer", ptr, count);
  if (e != cudaSuccess) return e;
  if (count == 0) return cudaSuccess;
  enqueue(stream, [ptr, value, count] {
    DeviceAccess access;
    std::memset(ptr, value, count);
    shadow_on_write(ptr, count);
    return std::string();
  });
  return cudaSuccess;
}

// Asynchronous with respect to the host for device memory, as on a GPU: on stream 0.
cudaError_t cudaMemset(void* ptr, int value, size_t count) { return cudaMemsetAsync(ptr, value, count, nullptr); }

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  using namespace ember::cudasim;
  if (stream == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamCreate: null stream");
  *stream = new CUstream_st{flags, create_stream_worker((flags & cudaStreamNonBlocking) == 0)};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  using namespace ember::cudasim;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (stream == nullptr || r.streams.erase(stream) == 0) {
      return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: stream is not live");
    }
  }
  destroy_stream_worker(stream->worker);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!ember::cudasim::is_live_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: stream is not live");
  }
  return ember::cudasim::synchronize_stream("cudaStreamSynchronize", stream);
}

// cudaErrorNotReady while work is pending, left as the thread's last error as a GPU leaves it.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  using namespace ember::cudasim;
  if (!is_live_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery: stream is not live");
  }
  if (!stream_idle(stream)) return set_last_error(cudaErrorNotReady);
  return report_stream_error("cudaStreamQuery", stream);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  using namespace ember::cudasim;
  if (!is_live_stream(stream) || fn == nullptr) {
    return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc: stream is not live or fn is null");
  }
  enqueue(stream, [fn, user_data] {
    fn(user_data);
    return std::string();
  });
  return cudaSuccess;
}
