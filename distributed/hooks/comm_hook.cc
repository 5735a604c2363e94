#include "distributed/hooks/comm_hook.h"

#include <algorithm>
#include <memory>

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
  ProcessGroup* pg = &group;
  // Round 1: every rank's nnz, so receive buffers can be sized.
  std::vector<std::vector<Tensor>> nnz_out(1);
  for (int r = 0; r < world; ++r) nnz_out[0].push_back(empty({1}, kInt64));
  std::vector<Tensor> nnz_in{from_vector<int64_t>({indices.size(1)})};
  FuturePtr sizes = group.allgather(nnz_out, nnz_in)->get_future();
  const int64_t sd = indices.size(0);
  const Shape dense_shape = sparse.sizes();
  // Round 2, chained (Note [Collectives issued from callbacks run inline]): indices (flattened
  // [sparse_dim * nnz]) and values, issued back to back from the sizes' callback.
  auto idx_out = std::make_shared<std::vector<std::vector<Tensor>>>(1);
  auto val_out = std::make_shared<std::vector<std::vector<Tensor>>>(1);
  FuturePtr gathered = sizes->then_future([pg, nnz_out, indices, values, idx_out, val_out, sd,
                                           world](Future&) {
    Shape row_shape = values.sizes();
    for (int r = 0; r < world; ++r) {
      const int64_t n = nnz_out[0][r].item<int64_t>();
      (*idx_out)[0].push_back(empty({sd * n}, kInt64));
      Shape vs = row_shape;
      vs[0] = n;
      (*val_out)[0].push_back(empty(vs, values.dtype()));
    }
    std::vector<Tensor> idx_in{indices.reshape({-1})}, val_in{values};
    FuturePtr idx_future = pg->allgather(*idx_out, idx_in)->get_future();
    FuturePtr val_future = pg->allgather(*val_out, val_in)->get_future();
    return idx_future->then_future([val_future](Future&) { return val_future; });
  });
  return gathered->then([idx_out, val_out, sd, dense_shape, world](Future&) {
    std::vector<Tensor> idx_parts, val_parts;
    for (int r = 0; r < world; ++r) {
      const int64_t n = (*idx_out)[0][r].numel() / std::max<int64_t>(sd, 1);
      idx_parts.push_back((*idx_out)[0][r].view({sd, n}));
      val_parts.push_back((*val_out)[0][r]);
    }
    Tensor all = sparse_coo_tensor(cat(idx_parts, 1), cat(val_parts, 0), dense_shape);
    return std::vector<Tensor>{coalesce(all)};
  });
}

}  // namespace ember::distributed
