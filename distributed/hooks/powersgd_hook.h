// The PowerSGD communication hooks (PyTorch's ddp_comm_hooks/powerSGD_hook.py): powerSGD_hook
// (per-tensor low-rank compression with error feedback and warm start) and batched_powerSGD_hook
// (the whole bucket as one square matrix, zero-padded). docs/design.md step 10.
//
// Asynchrony. As PyTorch, the rounds are chained on futures, so the autograd thread never blocks
// in the hook and backward keeps running while a bucket is compressed: the hook computes P = M Q and
// issues the uncompressed tensors' and the Ps' allreduces; the Ps' callback orthogonalises P,
// computes Q = M^T P and issues the Qs' allreduce; the last callback reconstructs M = P Q^T and
// updates the error-feedback residual. Those callbacks run on the MPI worker thread, and a
// collective issued there runs inline, right after the one whose callback issued it, so every
// rank issues the Q allreduce at the same point of its collective sequence whatever the autograd
// thread queued meanwhile (Note [Collectives issued from callbacks run inline],
// process_group_mpi.cc). The Q computation therefore runs on the worker, which delays the next
// bucket's collective by that much but no longer stalls backward.
#pragma once

#include <cstdint>
#include <tuple>

#include "distributed/hooks/comm_hook.h"
#include "distributed/hooks/powersgd_state.h"

namespace ember::distributed {

// Before state.start_powerSGD_iter: allreduce_hook. Then every tensor of the bucket is viewed as a
// 2-d matrix (rows = first dimension); those passing the compression-rate test are compressed to
// rank min(n, m, r) via one power iteration (P = MQ, allreduce P, orthogonalise, Q = M^T P,
// allreduce Q, M ~ P Q^T / world); the rest (vectors, small matrices) are allreduced as one flat
// buffer. With error feedback the local residual is added to the next iteration's gradient; with
// warm start Q is reused across iterations. As PyTorch, the matrices are visited grouped by shape
// (first-seen order), which lays out the P/Q memory; with batch_tensors_with_same_shape each group
// is stacked and runs as one batched matmul. Under fp16/bf16_compress_wrapper (as in PyTorch) the
// bucket arrives in half precision, and P, Q, the residual and the allreduces stay in that format.
FuturePtr powerSGD_hook(PowerSGDState& state, GradBucket& bucket);

// The whole flat bucket as one ceil(sqrt(numel))^2 matrix padded with zeros, compressed with rank
// min(r, side). Higher compression, usually lower accuracy than powerSGD_hook.
FuturePtr batched_powerSGD_hook(PowerSGDState& state, GradBucket& bucket);

// (compress?, uncompressed numel, compressed numel) for an n x m matrix at rank r: compress when
// (n + m) * r * min_compression_rate < n * m.
std::tuple<bool, int64_t, int64_t> should_compress(int64_t n, int64_t m, int64_t rank,
                                                   double min_compression_rate);

// Gram-Schmidt on the columns of a row-major (n x r) floating-point matrix, in place (float16 and
// bfloat16 through float). A column of zero norm with epsilon == 0 becomes zeros (PyTorch would
// produce NaN there).
void orthogonalize(const Tensor& matrix, double epsilon = 0);

}  // namespace ember::distributed
