// docs/design.md step 4: compute_bucket_assignment_by_size — group parameters into gradient buckets.
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

// Each bucket's parameter indices. PyTorch also returns the size limit each bucket was filled
// against, which nothing reads (its Reducer takes and ignores them); ember does not.
std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(
    const std::vector<Tensor>& tensors, const std::vector<size_t>& bucket_size_limits,
    const std::vector<bool>& expect_sparse_gradient = {}, const std::vector<int64_t>& tensor_indices = {});

// DDP's default first-bucket size (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES).
constexpr size_t kDefaultFirstBucketBytes = 1024 * 1024;

}  // namespace ember::distributed
