#include "distributed/hooks/comm_hook.h"

#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::distributed {

FuturePtr AllReduceBySumCommHook::run_hook(GradBucket& bucket) {
  if (bucket.buffer().is_sparse()) return allreduce_sparse(*group_, bucket.buffer());
  std::vector<Tensor> tensors{bucket.buffer()};
  return group_->allreduce(tensors)->get_future();
}

FuturePtr allreduce_sparse(ProcessGroup& group, const Tensor& sparse) {
  Tensor s = coalesce(sparse);
  Tensor indices = sparse_indices(s).contiguous(), values = sparse_values(s).contiguous();
  const int world = group.size();
  // Round 1: every rank's nnz, so receive buffers can be sized.
  std::vector<std::vector<Tensor>> nnz_out(1);
  for (int r = 0; r < world; ++r) nnz_out[0].push_back(empty({1}, kInt64));
  std::vector<Tensor> nnz_in{from_vector<int64_t>({indices.size(1)})};
  group.allgather(nnz_out, nnz_in)->wait();
  // Round 2: indices (flattened [sparse_dim * nnz]) and values.
  std::vector<std::vector<Tensor>> idx_out(1), val_out(1);
  const int64_t sd = indices.size(0);
  Shape row_shape = values.sizes();
  for (int r = 0; r < world; ++r) {
    const int64_t n = nnz_out[0][r].item<int64_t>();
    idx_out[0].push_back(empty({sd * n}, kInt64));
    Shape vs = row_shape;
    vs[0] = n;
    val_out[0].push_back(empty(vs, values.dtype()));
  }
  std::vector<Tensor> idx_in{indices.reshape({-1})}, val_in{values};
  group.allgather(idx_out, idx_in)->wait();
  WorkPtr values_work = group.allgather(val_out, val_in);
  const Shape dense_shape = sparse.sizes();
  return values_work->get_future()->then([idx_out, val_out, sd, dense_shape, world](Future&) {
    std::vector<Tensor> idx_parts, val_parts;
    for (int r = 0; r < world; ++r) {
      const int64_t n = idx_out[0][r].numel() / std::max<int64_t>(sd, 1);
      idx_parts.push_back(idx_out[0][r].view({sd, n}));
      val_parts.push_back(val_out[0][r]);
    }
    Tensor all = sparse_coo_tensor(cat(idx_parts, 1), cat(val_parts, 0), dense_shape);
    return std::vector<Tensor>{coalesce(all)};
  });
}

}  // namespace ember::distributed
