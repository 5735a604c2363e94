#include "distributed/utils.h"

#include "tensor/factories.h"

namespace ember::distributed {

int64_t check_same_dtype_device(const std::vector<Tensor>& tensors, const char* op) {
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined(), op, ": tensor ", i, " is undefined");
    EMBER_CHECK(tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(),
                op, ": all tensors must have the same dtype and device, but tensor 0 is ",
                tensors[0].describe(), " and tensor ", i, " is ", tensors[i].describe());
    total += tensors[i].numel();
  }
  return total;
}

Tensor flatten_dense_tensors(const std::vector<Tensor>& tensors) {
  EMBER_CHECK(!tensors.empty(), "flatten_dense_tensors: empty tensor list");
  const int64_t total = check_same_dtype_device(tensors, "flatten_dense_tensors");
  Tensor flat = empty({total}, TensorOptions(tensors[0].dtype(), tensors[0].device()));
  int64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.numel() > 0) flat.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return flat;
}

std::vector<Tensor> unflatten_dense_tensors(const Tensor& flat, const std::vector<Tensor>& like) {
  std::vector<Tensor> out;
  out.reserve(like.size());
  int64_t offset = 0;
  for (const auto& t : like) {
    out.push_back(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
  EMBER_CHECK(offset == flat.numel(), "unflatten_dense_tensors: flat buffer has ", flat.numel(),
              " elements but the tensors need ", offset);
  return out;
}

void copy_from_flat(const Tensor& flat, const std::vector<Tensor>& dst) {
  auto views = unflatten_dense_tensors(flat, dst);
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst[i].numel() > 0) dst[i].copy_(views[i]);
  }
}

}  // namespace ember::distributed
