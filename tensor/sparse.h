// Sparse COO tensors: `indices` (int64 [sparse_dim, nnz]) and `values` ([nnz, dense dims...]) for a
// tensor of `sizes`. Minimal but real: enough for Embedding(sparse=true) gradients, their
// accumulation, and DDP's sparse path (coalesce, to_dense, add into dense, scale, concatenate).
// Dense ops given a sparse tensor throw an error naming the op.
#pragma once

#include "tensor/tensor.h"

namespace ember {

class SparseTensorImpl : public TensorImpl {
 public:
  SparseTensorImpl(Shape sizes, Tensor indices, Tensor values, bool coalesced);
  Layout layout() const override { return Layout::kSparse; }
  Device device() const override { return values_.device(); }
  const Tensor& indices() const { return indices_; }
  const Tensor& values() const { return values_; }
  bool coalesced() const { return coalesced_; }
  int64_t sparse_dim() const { return indices_.sizes()[0]; }
  int64_t nnz() const { return indices_.sizes()[1]; }

 private:
  Tensor indices_;
  Tensor values_;
  bool coalesced_;
};

// Validates shapes, dtype and index bounds (errors name the offending entry).
Tensor sparse_coo_tensor(const Tensor& indices, const Tensor& values, const Shape& sizes);
const SparseTensorImpl& sparse_impl(const Tensor& t, const char* op);
Tensor sparse_indices(const Tensor& t);
Tensor sparse_values(const Tensor& t);
int64_t sparse_nnz(const Tensor& t);
bool is_coalesced(const Tensor& t);
// Sorts indices and sums duplicates.
Tensor coalesce(const Tensor& t);
Tensor to_dense(const Tensor& t);
// dense += alpha * sparse
const Tensor& add_sparse_to_dense_(const Tensor& dense, const Tensor& sparse, const Scalar& alpha = 1);
// a + b for two sparse tensors of one shape: indices and values concatenated (uncoalesced).
Tensor sparse_add(const Tensor& a, const Tensor& b);
Tensor sparse_mul_scalar(const Tensor& t, const Scalar& s);

}  // namespace ember
