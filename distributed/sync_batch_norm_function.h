// sync_batch_norm: batch normalisation whose batch statistics span every rank of a process group
// (PyTorch's torch.nn.modules._functions.SyncBatchNorm). Forward all-gathers each rank's per-channel
// mean, biased variance and element count and combines them count-weighted, so ranks may hold
// different batch sizes, an empty one included (it contributes count 0). Backward all-reduces the
// per-channel sum_dy and sum_dy_xmu that the input gradient needs; weight and bias gradients stay
// local (DDP reduces them). Collective order and sizes: Note [SyncBatchNorm collectives].
#pragma once

#include "distributed/process_group.h"
#include "tensor/tensor.h"

namespace ember::distributed {

// Note [SyncBatchNorm collectives]
// Per call, on `process_group`, every rank issues:
//   forward:  allgather_base of a float64 row [mean (C), biased var (C), count, needs_backward]
//             (PyTorch gathers [mean, invstd, count]; the variance avoids an eps round trip, and
//             needs_backward tells a joined rank whether the backward collective follows);
//   backward: iff needs_backward (the input requires grad), allreduce(SUM) of float64
//             [sum_dy (C), sum_dy_xmu (C)], in the reverse order of the forward calls (the
//             engine runs nodes by decreasing sequence number).
// A rank without data (a joined rank: SyncBatchNormJoinable, sync_batch_norm.h) issues the same
// with zeros and count 0.

struct SyncBatchNormArgs {
  double eps = 1e-5;
  double momentum = 0.1;
  ProcessGroupPtr process_group;  // required
};

// input [N, C, ...] (N may be 0 on some ranks); weight, bias, running_mean, running_var [C] or
// undefined. Training-mode normalisation with the group's statistics; running statistics, when
// given, are updated in place with the group's mean and unbiased variance (PyTorch's momentum
// convention). Differentiable in input, weight and bias (first order).
Tensor sync_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, const SyncBatchNormArgs& args);

// The length of one rank's forward row for C channels: 2C + 2.
inline int64_t sync_batch_norm_row_size(int64_t channels) { return 2 * channels + 2; }

}  // namespace ember::distributed
