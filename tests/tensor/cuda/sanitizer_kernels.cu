// The planted bugs of sanitizer_kernels.h, each a one-line change from its correct twin.
#include "tensor/cuda/device_code.h"
#include "tests/tensor/cuda/sanitizer_kernels.h"

namespace ember::cuda::testing {
namespace {

__global__ void fill_kernel(float* out, int n, bool one_past_end) {
  const int i = threadIdx.x;
  if (one_past_end ? i <= n : i < n) out[i] = 1.0f;
}

__global__ void add_one_kernel(const float* in, float* out, int n) {
  const int i = threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

__global__ void half_written_shared_kernel(float* out) {
  EMBER_SHARED(float, s, 64);
  if (threadIdx.x < 32) s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}

__global__ void tree_sum_kernel(const float* in, float* out, bool barrier_between_levels) {
  EMBER_SHARED(float, partial, 256);
  const int t = threadIdx.x;
  partial[t] = in[t];
  __syncthreads();
  for (int half = 128; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    if (barrier_between_levels) __syncthreads();
  }
  if (t == 0) out[0] = partial[0];
}

__global__ void warp_exchange_kernel(float* out, bool sync_warp) {
  EMBER_SHARED(float, s, 32);
  const int lane = threadIdx.x;
  s[lane] = 0.0f;
  __syncthreads();
  s[lane] = static_cast<float>(lane);
  if (sync_warp) __syncwarp();
  out[lane] = s[lane ^ 1];
}

__global__ void halved_index_kernel(float* out) { out[threadIdx.x / 2] = static_cast<float>(threadIdx.x); }

__global__ void increment_kernel(float* out, bool atomically) {
  if (threadIdx.x != 0) return;
  if (atomically) {
    atomicAdd(out, 1.0f);
  } else {
    out[0] += 1.0f;
  }
}

cudaError_t finish(cudaStream_t stream) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) return launch;
  const cudaError_t ran = cudaStreamSynchronize(stream);
  cudaGetLastError();
  return ran;
}

}  // namespace

cudaError_t write_one_past_end(float* out, int n, cudaStream_t stream) {
  EMBER_LAUNCH(fill_kernel, 1, n + 1, 0, stream, out, n, true);
  return finish(stream);
}

cudaError_t write_in_bounds(float* out, int n, cudaStream_t stream) {
  EMBER_LAUNCH(fill_kernel, 1, n + 1, 0, stream, out, n, false);
  return finish(stream);
}

cudaError_t launch_write_in_bounds(float* out, int n, cudaStream_t stream) {
  EMBER_LAUNCH(fill_kernel, 1, n + 1, 0, stream, out, n, false);
  return cudaGetLastError();
}

cudaError_t add_one(const float* in, float* out, int n, cudaStream_t stream) {
  EMBER_LAUNCH(add_one_kernel, 1, n, 0, stream, in, out, n);
  return finish(stream);
}

cudaError_t launch_add_one(const float* in, float* out, int n, cudaStream_t stream) {
  EMBER_LAUNCH(add_one_kernel, 1, n, 0, stream, in, out, n);
  return cudaGetLastError();
}

cudaError_t read_unwritten_shared(float* out) {
  EMBER_LAUNCH(half_written_shared_kernel, 1, 64, 0, nullptr, out);
  return finish(nullptr);
}

cudaError_t tree_sum(const float* in, float* out, bool barrier_between_levels) {
  EMBER_LAUNCH(tree_sum_kernel, 1, 256, 0, nullptr, in, out, barrier_between_levels);
  return finish(nullptr);
}

cudaError_t exchange_in_warp(float* out, bool sync_warp) {
  EMBER_LAUNCH(warp_exchange_kernel, 1, 32, 0, nullptr, out, sync_warp);
  return finish(nullptr);
}

cudaError_t two_threads_write_one_element(float* out) {
  EMBER_LAUNCH(halved_index_kernel, 1, 64, 0, nullptr, out);
  return finish(nullptr);
}

cudaError_t every_block_increments(float* out, int blocks) {
  EMBER_LAUNCH(increment_kernel, blocks, 32, 0, nullptr, out, false);
  return finish(nullptr);
}

cudaError_t every_block_increments_atomically(float* out, int blocks) {
  EMBER_LAUNCH(increment_kernel, blocks, 32, 0, nullptr, out, true);
  return finish(nullptr);
}

}  // namespace ember::cuda::testing
