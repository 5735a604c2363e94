// DESIGN.md step 4: compute_bucket_assignment_by_size — group parameters into gradient buckets.
// Exactly PyTorch's function of that name: buckets are per (dtype, device); the size limits list
// is advanced per key each time a bucket fills (first bucket 1 MiB, then bucket_cap); tensors that
// expect a sparse gradient get a bucket of their own; without tensor_indices the buckets are sorted
// by their smallest index (DDP then reverses the list: gradients arrive in reverse order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ember::distributed {

// compute_bucket_assignment_by_size's result, as PyTorch's pair: each bucket's parameter indices,
// and the size limit in bytes it was filled against.
struct BucketAssignment {
  std::vector<std::vector<size_t>> bucket_indices;
  std::vector<size_t> per_bucket_size_limits;  // 0 for sparse buckets (no limit)
};

BucketAssignment compute_bucket_assignment_by_size(
    const std::vector<Tensor>& tensors, const std::vector<size_t>& bucket_size_limits,
    const std::vector<bool>& expect_sparse_gradient = {}, const std::vector<int64_t>& tensor_indices = {});

// DDP's default first-bucket size (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES).
constexpr size_t kDefaultFirstBucketBytes = 1024 * 1024;

}  // namespace ember::distributed
