// The collective helpers DDP's constructor calls (docs/design.md steps 2 and 3): checking that every rank
// holds parameters of the same shapes as rank 0, and broadcasting parameters and buffers from the
// root in large flattened buckets (PyTorch's verify_params_across_processes and broadcast_coalesced).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "tensor/tensor.h"

namespace ember::distributed {

constexpr int64_t kDefaultBroadcastBucketBytes = 250LL * 1024 * 1024;

// Broadcasts `tensors` from `root` in place. Tensors are grouped by (dtype, device) into buckets of
// at most `buffer_size` bytes (a larger tensor gets a bucket of its own); each bucket is flattened,
// broadcast as one collective and copied back, with at most two buckets in flight so the copies of
// one overlap the broadcast of the next. Every rank must pass tensors of the same shapes.
void broadcast_coalesced(ProcessGroup& process_group, const std::vector<Tensor>& tensors,
                         int64_t buffer_size = kDefaultBroadcastBucketBytes, int root = 0);

// The bucket layout broadcast_coalesced uses: indices into `tensors`, in launch order.
std::vector<std::vector<size_t>> bucket_tensors_by_size(const std::vector<Tensor>& tensors,
                                                        int64_t buffer_size);

// Broadcasts rank 0's parameter count, dtypes, sizes and strides; throws on every rank when any rank
// differs. The failing rank's message names the parameter index (and name, when `names` is given),
// this rank, and both shapes; the other ranks' messages name the ranks that failed.
void verify_params_across_processes(ProcessGroup& process_group, const std::vector<Tensor>& params,
                                    const std::vector<std::string>& names = {});

}  // namespace ember::distributed
