#include "tensor/sparse.h"

#include <algorithm>
#include <numeric>

#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember {

SparseTensorImpl::SparseTensorImpl(Shape sizes, Tensor indices, Tensor values, bool coalesced)
    : TensorImpl(Storage(), sizes, contiguous_strides(sizes), 0, values.dtype()),
      indices_(std::move(indices)),
      values_(std::move(values)),
      coalesced_(coalesced) {}

const SparseTensorImpl& sparse_impl(const Tensor& t, const char* op) {
  EMBER_CHECK(t.defined() && t.is_sparse(), op, ": expected a sparse tensor, got ", t.describe());
  return static_cast<const SparseTensorImpl&>(*t.unsafe_impl());
}

Tensor sparse_coo_tensor(const Tensor& indices, const Tensor& values, const Shape& sizes) {
  EMBER_CHECK(indices.defined() && values.defined(), "sparse_coo_tensor: undefined indices or values");
  EMBER_CHECK(indices.dtype() == kInt64 && indices.dim() == 2, "sparse_coo_tensor: indices must be ",
              "an int64 tensor of shape [sparse_dim, nnz], got ", indices.describe());
  const int64_t sparse_dim = indices.sizes()[0], nnz = indices.sizes()[1];
  EMBER_CHECK(sparse_dim >= 1 && sparse_dim <= static_cast<int64_t>(sizes.size()),
              "sparse_coo_tensor: indices have ", sparse_dim, " sparse dims for a tensor of size ",
              shape_to_string(sizes));
  Shape expect{nnz};
  expect.insert(expect.end(), sizes.begin() + sparse_dim, sizes.end());
  EMBER_CHECK(values.sizes() == expect, "sparse_coo_tensor: values ", values.describe(),
              " must have shape ", shape_to_string(expect), " for indices ", indices.describe(),
              " and size ", shape_to_string(sizes));
  EMBER_CHECK(indices.device() == values.device(), "sparse_coo_tensor: indices ",
              indices.describe(), " and values ", values.describe(), " must be on the same device");
  Tensor idx = indices.contiguous();
  // The bounds are checked on a host copy (one synchronisation for device indices).
  const Tensor host_idx = idx.cpu();
  const int64_t* ip = host_idx.data_ptr<int64_t>();
  for (int64_t d = 0; d < sparse_dim; ++d) {
    for (int64_t j = 0; j < nnz; ++j) {
      const int64_t v = ip[d * nnz + j];
      EMBER_CHECK(v >= 0 && v < sizes[d], "sparse_coo_tensor: index ", v, " at entry ", j,
                  " is out of bounds for dimension ", d, " with size ", sizes[d]);
    }
  }
  return Tensor(std::make_shared<SparseTensorImpl>(sizes, idx, values, nnz <= 1));
}

Tensor sparse_indices(const Tensor& t) { return sparse_impl(t, "indices").indices(); }
Tensor sparse_values(const Tensor& t) { return sparse_impl(t, "values").values(); }
int64_t sparse_nnz(const Tensor& t) { return sparse_impl(t, "nnz").nnz(); }
bool is_coalesced(const Tensor& t) { return sparse_impl(t, "is_coalesced").coalesced(); }

Tensor coalesce(const Tensor& t) {
  const SparseTensorImpl& s = sparse_impl(t, "coalesce");
  if (s.coalesced()) return t;
  const int64_t sd = s.sparse_dim(), nnz = s.nnz();
  // The index bookkeeping runs on the host; the values are summed where they are, by one
  // index_add_ that adds entry j to the row of its unique index (in entry order, as a sequential
  // sum would).
  const Tensor host_idx = s.indices().cpu().contiguous();
  const int64_t* ip = host_idx.data_ptr<int64_t>();
  // Linearise each index tuple, sort, then number the runs of equal keys.
  std::vector<int64_t> keys(nnz, 0);
  for (int64_t j = 0; j < nnz; ++j) {
    for (int64_t d = 0; d < sd; ++d) keys[j] = keys[j] * t.sizes()[d] + ip[d * nnz + j];
  }
  std::vector<int64_t> order(nnz);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  std::vector<int64_t> unique_of(nnz);  // entry j -> its unique index's row in the result
  std::vector<int64_t> first_entry;     // unique row -> the first entry with that index
  for (int64_t k = 0; k < nnz; ++k) {
    if (k == 0 || keys[order[k]] != keys[order[k - 1]]) first_entry.push_back(order[k]);
    unique_of[order[k]] = static_cast<int64_t>(first_entry.size()) - 1;
  }
  const int64_t n_unique = static_cast<int64_t>(first_entry.size());
  Tensor new_idx = empty({sd, n_unique}, kInt64);
  int64_t* np = new_idx.data_ptr<int64_t>();
  for (int64_t u = 0; u < n_unique; ++u) {
    for (int64_t d = 0; d < sd; ++d) np[d * n_unique + u] = ip[d * nnz + first_entry[u]];
  }
  const Device device = s.values().device();
  Shape vshape = s.values().sizes();
  vshape[0] = n_unique;
  Tensor new_vals = zeros(vshape, TensorOptions(s.values().dtype(), device));
  index_add_(new_vals, 0, from_vector<int64_t>(unique_of).to(device), s.values());
  return Tensor(std::make_shared<SparseTensorImpl>(t.sizes(), new_idx.to(device), new_vals, true));
}

const Tensor& add_sparse_to_dense_(const Tensor& dense, const Tensor& sparse, const Scalar& alpha) {
  const SparseTensorImpl& s = sparse_impl(sparse, "add_sparse_to_dense_");
  EMBER_CHECK(!dense.is_sparse() && dense.sizes() == sparse.sizes(), "add_sparse_to_dense_: dense ",
              dense.describe(), " and sparse ", sparse.describe(), " must have the same shape");
  const int64_t sd = s.sparse_dim(), nnz = s.nnz();
  if (sd == 1) {  // rows of a matrix (embedding gradients): one index_add_, on any device
    index_add_(dense, 0, s.indices().select(0, 0),
               alpha.to_double() == 1.0 ? s.values() : mul(s.values(), alpha));
    return dense;
  }
  const Tensor host_idx = s.indices().cpu().contiguous();
  const int64_t* ip = host_idx.data_ptr<int64_t>();
  for (int64_t j = 0; j < nnz; ++j) {
    Tensor dst = dense;
    for (int64_t d = 0; d < sd; ++d) dst = dst.select(0, ip[d * nnz + j]);
    Tensor v = s.values().select(0, j);
    if (alpha.to_double() == 1.0) {
      add_(dst, v);
    } else {
      add_(dst, v, alpha);
    }
  }
  return dense;
}

Tensor to_dense(const Tensor& t) {
  if (!t.is_sparse()) return t;
  const SparseTensorImpl& s = sparse_impl(t, "to_dense");
  Tensor out = zeros(t.sizes(), TensorOptions(t.dtype(), s.values().device()));
  return add_sparse_to_dense_(out, t);
}

Tensor sparse_add(const Tensor& a, const Tensor& b) {
  const SparseTensorImpl& sa = sparse_impl(a, "sparse_add");
  const SparseTensorImpl& sb = sparse_impl(b, "sparse_add");
  EMBER_CHECK(a.sizes() == b.sizes() && sa.sparse_dim() == sb.sparse_dim() && a.dtype() == b.dtype(),
              "sparse_add: ", a.describe(), " and ", b.describe(), " differ in shape or dtype");
  return Tensor(std::make_shared<SparseTensorImpl>(a.sizes(), cat({sa.indices(), sb.indices()}, 1),
                                                   cat({sa.values(), sb.values()}, 0), false));
}

Tensor sparse_mul_scalar(const Tensor& t, const Scalar& v) {
  const SparseTensorImpl& s = sparse_impl(t, "sparse_mul_scalar");
  return Tensor(std::make_shared<SparseTensorImpl>(t.sizes(), s.indices(), mul(s.values(), v),
                                                   s.coalesced()));
}

}  // namespace ember
