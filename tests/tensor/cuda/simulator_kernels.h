// Launchers for the kernels that test the CUDA simulator's semantics (simulator_kernels.cu). Each
// runs on the default stream, synchronises, and returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime.h>

namespace ember::cuda::testing {

// out[b] = sum of in[b * 256 .. b * 256 + 255]: a shared-memory tree with __syncthreads.
cudaError_t block_sums(const float* in, float* out, int blocks);
// Every lane of every warp gets its warp's sum through __shfl_xor_sync (butterfly), and lane 0
// also writes the __shfl_down_sync sum: out_xor[i] per thread, out_down[w] per warp.
cudaError_t warp_sums(const float* in, float* out_xor, float* out_down, int threads);
// *counter += 1 from every thread of `blocks` x 256.
cudaError_t atomic_count(float* counter, int blocks);
// out[i] = in[blockDim - 1 - i] within each block of `threads`, through dynamic shared memory.
cudaError_t reverse_in_blocks(const int* in, int* out, int threads, int blocks);
// out[linear id] = linear id over a (gx, gy, gz) grid of (bx, by, bz) blocks.
cudaError_t write_indices(int* out, dim3 grid, dim3 block);
// out[w] = __ballot_sync of (lane % 3 == 0) for each warp of one 64-thread block.
cudaError_t ballots(unsigned* out);
// Each thread decrements its copy of `n` and writes it: every out[i] == n - 1.
cudaError_t parameters_are_per_thread(int* out, int n, int threads);
// Broken on purpose: only even threads reach __syncthreads.
cudaError_t divergent_barrier(float* out);
// Broken on purpose: thread 0 returns before the barrier the others reach.
cudaError_t early_exit_before_barrier(float* out);
// Broken on purpose: 2048 threads per block.
cudaError_t oversized_block(float* out);

}  // namespace ember::cuda::testing
