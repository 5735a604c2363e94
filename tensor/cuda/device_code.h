// Included by every .cu file in ember: what lets one kernel source compile under nvcc and under the
// CUDA simulator (sim/cuda/, --config=cudasim), which runs it on the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// Launches `kernel` (a name without commas: alias a template with several arguments first) on
// `stream` with `shared_bytes` of dynamic shared memory. `kernel<<<...>>>` is CUDA-only syntax that
// a host compiler cannot parse, so no .cu file in ember writes it directly.
#ifdef EMBER_CUDA_SIMULATOR
#define EMBER_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  ::ember::cudasim::launch(#kernel, kernel, grid, block, shared_bytes, stream, __VA_ARGS__)
#else
#define EMBER_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__)
#endif

// `T* name` pointing at the block's dynamic shared memory (the launch's shared_bytes).
#ifdef EMBER_CUDA_SIMULATOR
#define EMBER_DYNAMIC_SHARED(T, name) \
  T* name = static_cast<T*>(::ember::cudasim::dynamic_shared_memory())
#else
#define EMBER_DYNAMIC_SHARED(T, name)                               \
  extern __shared__ __align__(16) unsigned char ember_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(ember_dynamic_shared_)
#endif

// `T name[count]` in the block's shared memory (a static __shared__ array). The simulator places it
// where it can poison it at each block's start and check every access (sim/cuda/checks.cc).
#ifdef EMBER_CUDA_SIMULATOR
#define EMBER_SHARED(T, name, count)                                                           \
  static const char ember_shared_##name = 0;                                                   \
  T* const name = static_cast<T*>(::ember::cudasim::static_shared_memory(                      \
      &ember_shared_##name, sizeof(T) * static_cast<size_t>(count), alignof(T)))
#else
#define EMBER_SHARED(T, name, count) __shared__ T name[count]
#endif

namespace ember::cuda {

constexpr int kThreadsPerBlock = 256;
// Grid-stride loops cover the rest; enough blocks to fill any current GPU several times over.
constexpr int64_t kMaxBlocks = 4096;

inline unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks);
}

// Calls f(int32_t{}) when every index a kernel computes fits in 32 bits, else f(int64_t{}): the
// kernel's index type. 64-bit division costs several times the instructions of 32-bit on a GPU,
// and kernels that are mostly index arithmetic (im2col, batch norm's sums) feel it.
template <typename F>
auto with_index_type(bool fits_int32, F f) {
  if (fits_int32) return f(int32_t{});
  return f(int64_t{});
}

// The index of this thread in a 1-d grid, and the stride of a grid-stride loop.
__device__ __forceinline__ int64_t global_thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

}  // namespace ember::cuda
