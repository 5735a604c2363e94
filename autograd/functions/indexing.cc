// Backward formulas for cat and the indexing ops (each is the adjoint scatter/gather of its op).
#include "autograd/functions/function_node.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::autograd {

void register_indexing_formulas(AutogradKernels& k) {
  using Needs = std::vector<bool>;
  k.cat = [](const std::vector<Tensor>& tensors, int64_t dim) {
    // Inputs skipped by cat (1-d and empty) get an empty gradient; the rest a slice of g.
    std::vector<int64_t> lengths;
    int64_t ndim = 0;
    for (const Tensor& t : tensors) {
      const bool skipped = t.dim() == 1 && t.numel() == 0;
      if (!skipped) ndim = t.dim();
      lengths.push_back(skipped ? -1 : 0);
    }
    const int64_t d = ndim > 0 ? wrap_dim(dim, ndim, "cat") : 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (lengths[i] == 0) lengths[i] = tensors[i].sizes()[d];
    }
    return record_op({"CatBackward", tensors}, [&] { return cat(tensors, dim); },
                     [lengths, d](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       variable_list out;
                       int64_t offset = 0;
                       for (int64_t len : lengths) {
                         if (len < 0) {
                           out.push_back(zeros({0}, TensorOptions(g.dtype(), g.device())));
                           continue;
                         }
                         out.push_back(g.narrow(d, offset, len));
                         offset += len;
                       }
                       return out;
                     });
  };
  k.index_select = [](const Tensor& t, int64_t dim, const Tensor& index) {
    const Shape in_shape = t.sizes();
    return record_op({"IndexSelectBackward", {t}, {index}}, [&] { return index_select(t, dim, index); },
                     [in_shape, dim](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       Tensor gi = zeros(in_shape, TensorOptions(g.dtype(), g.device()));
                       if (in_shape.empty()) return {g.reshape({})};
                       index_add_(gi, dim, s[0].reshape({-1}), g);
                       return {gi};
                     });
  };
  k.gather = [](const Tensor& t, int64_t dim, const Tensor& index) {
    const Shape in_shape = t.sizes();
    return record_op({"GatherBackward", {t}, {index}}, [&] { return gather(t, dim, index); },
                     [in_shape, dim](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       if (in_shape.empty()) return {g.reshape({})};
                       Tensor gi = zeros(in_shape, TensorOptions(g.dtype(), g.device()));
                       scatter_add_(gi, dim, s[0], g);
                       return {gi};
                     });
  };
  k.scatter_add = [](const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
    const Shape src_shape = src.sizes();
    return record_op({"ScatterAddBackward", {t, src}, {index}},
                     [&] { return scatter_add(t, dim, index, src); },
                     [src_shape, dim](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       Tensor gs;
                       if (n[1]) {
                         Tensor picked = gather(g, dim, s[0]);
                         if (picked.sizes() == src_shape) {
                           gs = picked;
                         } else {  // src larger than index: only the indexed corner got used
                           gs = zeros(src_shape, TensorOptions(g.dtype(), g.device()));
                           Tensor corner = gs;
                           for (int64_t d = 0; d < gs.dim(); ++d) corner = corner.narrow(d, 0, picked.sizes()[d]);
                           copy_(corner, picked);
                         }
                       }
                       return {g, gs};
                     });
  };
  k.index_add_ = [](const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) -> const Tensor& {
    record_inplace({"IndexAddBackward", {self, src}, {index}},
                   [&] { index_add_(self, dim, index, src); },
                   [dim](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                     return {g, n[1] ? index_select(g, dim, s[0].reshape({-1})) : Tensor()};
                   });
    return self;
  };
}

}  // namespace ember::autograd
