// The CUDA simulator's <cuda_runtime.h> (--config=cudasim): the part of the CUDA runtime API that
// ember's backend uses, executed on the host. The same .cu sources compile against this header with
// the host compiler; a launch runs every thread of every block on its stream's host thread, block
// by block, with the threads of a block as fibers so that __syncthreads, shared memory and warp
// shuffles behave as on the device (Note [CUDA simulator scheduling] in scheduler.cc), and every
// access they make checked as compute-sanitizer would (Note [Simulated compute-sanitizer]).
// "Device" memory is host memory that the simulator tracks, so copies and cuBLAS calls can check
// that a pointer really is device memory of the right extent. What it cannot show:
// tensor/cuda/README.md.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define EMBER_CUDA_SIMULATOR 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Static shared arrays are declared with EMBER_SHARED (device_code.h), which the simulator lays
// out in the block's shared memory where it can poison and check them; a plain __shared__ would
// be an unchecked host variable, so it does not compile here.
#define __shared__ static_assert(false, "declare shared arrays with EMBER_SHARED (tensor/cuda/device_code.h)");

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The built-in index variables, set by the scheduler before it runs each simulated thread.
// Initial-exec: kernels in shared libraries then read them without a __tls_get_addr call (the
// libraries are linked, not dlopen'd).
#define EMBER_CUDASIM_TLS __attribute__((tls_model("initial-exec"))) thread_local
inline EMBER_CUDASIM_TLS uint3 threadIdx{0, 0, 0};
inline EMBER_CUDASIM_TLS uint3 blockIdx{0, 0, 0};
inline EMBER_CUDASIM_TLS dim3 blockDim{1, 1, 1};
inline EMBER_CUDASIM_TLS dim3 gridDim{1, 1, 1};
constexpr int warpSize = 32;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventBlockingSync = 0x1;
constexpr unsigned cudaEventDisableTiming = 0x2;
constexpr unsigned cudaHostAllocDefault = 0x0;

// Runtime API (sim/cuda/runtime.cc, streams.cc, events.cc): work runs on each stream's own
// host thread, in stream order (Note [Simulated streams]).
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer_device);

cudaError_t cudaMalloc(void** ptr, size_t size);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                           size_t count);
cudaError_t cudaMemset(void* ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
using cudaHostFn_t = void (*)(void* user_data);
// Runs fn(user_data) on the stream's thread when the stream reaches it; later work waits for it.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

namespace ember::cudasim {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes;
  cudaStream_t stream;
  const void* entry;  // the kernel function, whose full name reports give
};

// Runs `thread_body` once for every thread of the launch when its stream reaches it (scheduler.cc,
// Note [Simulated streams]). A bad configuration is the launch's error (cudaGetLastError); a
// divergent barrier or a fault is printed and reported by the next call that synchronises with
// the stream, or the next launch on it.
void run_kernel(const char* kernel_name, const LaunchConfig& config, std::function<void()> thread_body);

// The kernel-side primitives. Outside a kernel they are errors.
void sync_threads();
void sync_warp(unsigned mask);
// Lane exchange for the warp intrinsics: every lane of `mask` offers `value` and receives the
// value of `source_lane` (its own when source_lane is out of range).
uint64_t warp_exchange(unsigned mask, uint64_t value, int source_lane);
// Bit l set when lane l of `mask` offered a non-zero predicate.
unsigned warp_ballot(unsigned mask, bool predicate);
int lane_id();
void* dynamic_shared_memory();
// The block's copy of the static shared array `declaration` (the address of a static that stands
// for it), laid out in the block's shared memory the first time a thread reaches it.
void* static_shared_memory(const void* declaration, size_t bytes, size_t alignment);

// What a sub-allocator tells the sanitizer (Note [Simulated compute-sanitizer], checks.cc), as
// NVTX's memory API tells compute-sanitizer: it handed out the first `bytes` of the cudaMalloc'd
// block at `ptr` for use on `stream`, or took back the whole `block_bytes`. Both take effect when
// `stream` reaches them, so work queued earlier keeps the block's previous state.
void annotate_suballocation(void* ptr, size_t bytes, cudaStream_t stream);
void annotate_suballocation_free(void* ptr, size_t block_bytes, cudaStream_t stream);
// Simulator-side work (a simulated NCCL collective) wrote [ptr, ptr + bytes) of device memory.
void mark_written(void* ptr, size_t bytes);

// While one is alive, host code may touch device memory: the simulator's own work on it (launches,
// copies, cuBLAS, simulated NCCL) runs inside one; outside, a host access faults and is named
// (Note [Simulated device memory is not host memory], device_memory.cc).
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// Runs `work` on `stream`'s thread when the stream reaches it (Note [Simulated streams],
// streams.cc): how the simulated NCCL runs its collectives. `work` returns "" or what failed.
void enqueue_host_work(cudaStream_t stream, std::function<std::string()> work);

// Whether [ptr, ptr + bytes) lies inside one live cudaMalloc allocation (cuBLAS checks its operands).
bool is_device_range(const void* ptr, size_t bytes);
// The detail of the last failed launch or call on this host thread ("" when none).
const char* last_error_detail();

// Collects a kernel's parameters as the device would: converted to the parameter types once, then
// a per-thread copy (a thread that changes a parameter changes only its own).
template <typename... Params, typename... Args>
void launch(const char* kernel_name, void (*kernel)(Params...), dim3 grid, dim3 block,
            size_t dynamic_shared_bytes, cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong argument count");
  // Taken by value: the launch runs after this call returns, as on a GPU.
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  const LaunchConfig config{grid, block, dynamic_shared_bytes, stream, reinterpret_cast<const void*>(kernel)};
  run_kernel(kernel_name, config, [kernel, params] {
    std::tuple<std::decay_t<Params>...> own = params;
    std::apply(kernel, own);
  });
}

template <typename T>
T shuffle(unsigned mask, T value, int source_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable<T>::value,
                "warp shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_exchange(mask, bits, source_lane);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// Read-modify-write of *address as one atomic step, also across host threads.
template <typename T, typename Update>
T atomic_update(T* address, Update update) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- or 8-byte words");
  using Word = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Word* word = reinterpret_cast<Word*>(address);
  Word expected = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    T old_value;
    std::memcpy(&old_value, &expected, sizeof(T));
    const T new_value = update(old_value);
    Word desired;
    std::memcpy(&desired, &new_value, sizeof(T));
    if (__atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED)) {
      return old_value;
    }
  }
}

}  // namespace ember::cudasim

inline void __syncthreads() { ::ember::cudasim::sync_threads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::ember::cudasim::sync_warp(mask); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

inline int ember_cudasim_shuffle_segment_start(int width) {
  return ::ember::cudasim::lane_id() / width * width;
}
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::ember::cudasim::shuffle(mask, var,
                                   ember_cudasim_shuffle_segment_start(width) + src_lane % width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = ::ember::cudasim::lane_id();
  const int src = lane + static_cast<int>(delta);
  const int end = ember_cudasim_shuffle_segment_start(width) + width;
  return ::ember::cudasim::shuffle(mask, var, src < end ? src : lane);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = ::ember::cudasim::lane_id();
  const int src = lane - static_cast<int>(delta);
  return ::ember::cudasim::shuffle(
      mask, var, src >= ember_cudasim_shuffle_segment_start(width) ? src : lane);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  const int lane = ::ember::cudasim::lane_id();
  const int src = lane ^ lane_mask;
  const int end = ember_cudasim_shuffle_segment_start(width) + width;
  return ::ember::cudasim::shuffle(mask, var, src < end ? src : lane);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::ember::cudasim::warp_ballot(mask, predicate != 0);
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == __ballot_sync(mask, 1);
}

template <typename T>
T atomicAdd(T* address, T value) {
  return ::ember::cudasim::atomic_update(address, [value](T old) { return old + value; });
}
template <typename T>
T atomicSub(T* address, T value) {
  return ::ember::cudasim::atomic_update(address, [value](T old) { return old - value; });
}
template <typename T>
T atomicMax(T* address, T value) {
  return ::ember::cudasim::atomic_update(address, [value](T old) { return old < value ? value : old; });
}
template <typename T>
T atomicMin(T* address, T value) {
  return ::ember::cudasim::atomic_update(address, [value](T old) { return value < old ? value : old; });
}
template <typename T>
T atomicExch(T* address, T value) {
  return ::ember::cudasim::atomic_update(address, [value](T) { return value; });
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  return ::ember::cudasim::atomic_update(address,
                                         [=](T old) { return old == compare ? value : old; });
}

// Device math that the host library lacks.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}
