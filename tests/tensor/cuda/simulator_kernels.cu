// Kernels that exercise what the CUDA simulator must get right (simulator_test.cc): barriers and
// shared memory, warp shuffles and votes, atomics, dynamic shared memory, multi-dimensional
// indices, per-thread parameters, and the divergences it must reject.
#include "tensor/cuda/device_code.h"
#include "tests/tensor/cuda/simulator_kernels.h"

namespace ember::cuda::testing {
namespace {

constexpr int kBlock = 256;

__global__ void block_sum_kernel(const float* in, float* out) {
  EMBER_SHARED(float, partial, kBlock);
  const int t = threadIdx.x;
  partial[t] = in[blockIdx.x * kBlock + t];
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

__global__ void warp_sum_kernel(const float* in, float* out_xor, float* out_down) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float butterfly = in[i];
  for (int mask = 16; mask > 0; mask /= 2) butterfly += __shfl_xor_sync(0xffffffffu, butterfly, mask);
  out_xor[i] = butterfly;
  float down = in[i];
  for (int delta = 16; delta > 0; delta /= 2) down += __shfl_down_sync(0xffffffffu, down, delta);
  if (threadIdx.x % 32 == 0) out_down[i / 32] = down;
}

__global__ void atomic_count_kernel(float* counter) { atomicAdd(counter, 1.0f); }

__global__ void reverse_kernel(const int* in, int* out) {
  EMBER_DYNAMIC_SHARED(int, buffer);
  const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  buffer[t] = in[base + t];
  __syncthreads();
  out[base + t] = buffer[blockDim.x - 1 - t];
}

__global__ void index_kernel(int* out) {
  const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const int id = block * (blockDim.x * blockDim.y * blockDim.z) + thread;
  out[id] = id;
}

__global__ void ballot_kernel(unsigned* out) {
  const unsigned votes = __ballot_sync(0xffffffffu, threadIdx.x % 3 == 0);
  if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = votes;
}

__global__ void parameter_kernel(int* out, int n) {
  n -= 1;
  out[blockIdx.x * blockDim.x + threadIdx.x] = n;
}

__global__ void divergent_kernel(float* out) {
  if (threadIdx.x % 2 == 0) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void early_exit_kernel(float* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

// The launch's error, else what running it reported; either way this thread's last error is
// cleared again, as the next launch's check would otherwise see it.
cudaError_t finish() {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) return launch;
  const cudaError_t ran = cudaDeviceSynchronize();
  cudaGetLastError();
  return ran;
}

}  // namespace

cudaError_t block_sums(const float* in, float* out, int blocks) {
  EMBER_LAUNCH(block_sum_kernel, blocks, kBlock, 0, nullptr, in, out);
  return finish();
}

cudaError_t warp_sums(const float* in, float* out_xor, float* out_down, int threads) {
  EMBER_LAUNCH(warp_sum_kernel, threads / 128, 128, 0, nullptr, in, out_xor, out_down);
  return finish();
}

cudaError_t atomic_count(float* counter, int blocks) {
  EMBER_LAUNCH(atomic_count_kernel, blocks, kBlock, 0, nullptr, counter);
  return finish();
}

cudaError_t reverse_in_blocks(const int* in, int* out, int threads, int blocks) {
  EMBER_LAUNCH(reverse_kernel, blocks, threads, threads * sizeof(int), nullptr, in, out);
  return finish();
}

cudaError_t write_indices(int* out, dim3 grid, dim3 block) {
  EMBER_LAUNCH(index_kernel, grid, block, 0, nullptr, out);
  return finish();
}

cudaError_t ballots(unsigned* out) {
  EMBER_LAUNCH(ballot_kernel, 1, 64, 0, nullptr, out);
  return finish();
}

cudaError_t parameters_are_per_thread(int* out, int n, int threads) {
  EMBER_LAUNCH(parameter_kernel, 2, threads / 2, 0, nullptr, out, n);
  return finish();
}

cudaError_t divergent_barrier(float* out) {
  EMBER_LAUNCH(divergent_kernel, 1, 64, 0, nullptr, out);
  return finish();
}

cudaError_t early_exit_before_barrier(float* out) {
  EMBER_LAUNCH(early_exit_kernel, 1, 64, 0, nullptr, out);
  return finish();
}

cudaError_t oversized_block(float* out) {
  EMBER_LAUNCH(divergent_kernel, 1, 2048, 0, nullptr, out);
  return finish();
}

}  // namespace ember::cuda::testing
