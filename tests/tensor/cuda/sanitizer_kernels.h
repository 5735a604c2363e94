// Kernels with one planted bug each, for the CUDA simulator's sanitizer (sanitizer_test.cc,
// Note [Simulated compute-sanitizer]), and their correct twins. Each launcher runs on `stream`,
// synchronises it, and returns what the launch or its run reported.
#pragma once

#include <cuda_runtime.h>

namespace ember::cuda::testing {

// out[i] = 1 for i <= n: one element past the end (`i < n` made `i <= n`).
cudaError_t write_one_past_end(float* out, int n, cudaStream_t stream = nullptr);
// out[i] = 1 for i < n, correct.
cudaError_t write_in_bounds(float* out, int n, cudaStream_t stream = nullptr);
// The same, only launched: the launch's own error.
cudaError_t launch_write_in_bounds(float* out, int n, cudaStream_t stream);
// out[i] = in[i] + 1 for i < n.
cudaError_t add_one(const float* in, float* out, int n, cudaStream_t stream = nullptr);
// The same, only launched: the launch's own error.
cudaError_t launch_add_one(const float* in, float* out, int n, cudaStream_t stream);
// One block of 64: threads < 32 write shared memory, all 64 read their own element after a
// barrier: threads 32.. read shared memory nobody wrote.
cudaError_t read_unwritten_shared(float* out);
// out[0] = the sum of in[0..255] by a shared-memory tree, with (correct) or without (planted)
// the __syncthreads between the tree's levels.
cudaError_t tree_sum(const float* in, float* out, bool barrier_between_levels);
// One warp: each lane writes s[lane], then reads s[lane ^ 1], with or without __syncwarp between.
cudaError_t exchange_in_warp(float* out, bool sync_warp);
// out[threadIdx.x / 2] = threadIdx.x: two threads write each element.
cudaError_t two_threads_write_one_element(float* out);
// out[0] += 1 by thread 0 of each of `blocks` blocks, without atomics.
cudaError_t every_block_increments(float* out, int blocks);
// The same with atomicAdd, correct.
cudaError_t every_block_increments_atomically(float* out, int blocks);

}  // namespace ember::cuda::testing
