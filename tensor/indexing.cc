// Joining and indexing: cat, stack, index_select, index_add_, gather, scatter_add, one_hot, and
// the allclose/equal comparisons. The argument and index-range checks live here, for every device;
// the kernels are slots of the device's kernel table (tensor/cpu/indexing_kernels.cc and
// tensor/cuda/indexing_kernels.cu).
#include <cmath>

#include "tensor/autograd_dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/factories.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace ember {
namespace {

void check_dense(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    EMBER_CHECK(t->defined(), op, ": got an undefined tensor");
    EMBER_CHECK(!t->is_sparse(), op, ": sparse tensors are not supported (got ", t->describe(),
                ")");
    if (first == nullptr) first = t;
    EMBER_CHECK(t->device() == first->device(), op,
                ": expected all tensors on the same device, got ", first->describe(), " and ",
                t->describe());
  }
}

// Index tensors are int64 (int32 accepted and widened), returned contiguous.
Tensor index_as_int64(const char* op, const Tensor& index) {
  EMBER_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op,
              ": index must be an int64 or int32 tensor, got ", index.describe());
  return index.to(kInt64).contiguous();
}

// Every index in [-size, size), checked with two reductions so that it works on any device (on a
// GPU, one synchronisation); the offending value is looked up only to write the error.
void check_index_range(const char* op, const Tensor& idx, int64_t size, int64_t dim) {
  if (idx.numel() == 0) return;
  const int64_t lo = min(idx).item<int64_t>(), hi = max(idx).item<int64_t>();
  if (lo >= -size && hi < size) return;
  const int64_t bad = lo < -size ? lo : hi;
  EMBER_THROW(op, ": index ", bad, " is out of bounds for dimension ", dim, " with size ", size);
}

void check_index_shape(const char* op, const Tensor& t, const Tensor& index, int64_t dim,
                       const Tensor* src) {
  EMBER_CHECK(index.dim() == t.dim(), op, ": index ", index.describe(),
              " must have as many dims as the input ", t.describe());
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d != dim) {
      EMBER_CHECK(index.sizes()[d] <= t.sizes()[d], op, ": index ", index.describe(),
                  " is larger than the input ", t.describe(), " at dimension ", d);
    }
    if (src) {
      EMBER_CHECK(index.sizes()[d] <= src->sizes()[d], op, ": index ", index.describe(),
                  " is larger than src ", src->describe(), " at dimension ", d);
    }
  }
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (should_record(tensors) && autograd_kernels().cat) return autograd_kernels().cat(tensors, dim);
  EMBER_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  // PyTorch skips 1-d empty tensors (legacy behaviour) when they are mixed with others.
  std::vector<const Tensor*> parts;
  ScalarType dt = tensors[0].dtype();
  for (const Tensor& t : tensors) {
    check_dense("cat", {&tensors[0], &t});
    dt = promote_types(dt, t.dtype());
    if (t.dim() == 1 && t.numel() == 0) continue;
    parts.push_back(&t);
  }
  if (parts.empty()) return empty({0}, TensorOptions(dt, tensors[0].device()));
  const Tensor& ref = *parts[0];
  EMBER_CHECK(ref.dim() > 0, "cat: zero-dimensional tensor cannot be concatenated");
  dim = wrap_dim(dim, ref.dim(), "cat");
  Shape shape = ref.sizes();
  shape[dim] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = *parts[i];
    EMBER_CHECK(t.dim() == ref.dim(), "cat: tensors must have the same number of dims: tensor 0 is ",
                ref.describe(), ", tensor ", i, " is ", t.describe());
    for (int64_t d = 0; d < ref.dim(); ++d) {
      EMBER_CHECK(d == dim || t.sizes()[d] == ref.sizes()[d], "cat: sizes of tensors must match ",
                  "except in dimension ", dim, ": tensor 0 is ", ref.describe(), ", tensor ", i,
                  " is ", t.describe());
    }
    shape[dim] += t.sizes()[dim];
  }
  Tensor out = empty(shape, TensorOptions(dt, ref.device()));
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    copy_(out.narrow(dim, offset, t->sizes()[dim]), *t);
    offset += t->sizes()[dim];
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    EMBER_CHECK(tensors[i].sizes() == tensors[0].sizes(),
                "stack: expects each tensor to be equal size, but got ", tensors[0].shape_str(),
                " at entry 0 and ", tensors[i].shape_str(), " at entry ", i);
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  if (auto f = autograd_kernel(&AutogradKernels::index_select, {&t})) return f(t, dim, index);
  check_dense("index_select", {&t, &index});
  EMBER_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got ", index.describe());
  Tensor idx = index_as_int64("index_select", index).reshape({-1});
  if (t.dim() == 0) {
    wrap_dim(dim, 0, "index_select");
    EMBER_CHECK(idx.numel() == 1, "index_select: a 0-dim input needs exactly one index");
    check_index_range("index_select", idx, 1, 0);
    return t.clone();
  }
  dim = wrap_dim(dim, t.dim(), "index_select");
  check_index_range("index_select", idx, t.sizes()[dim], dim);
  Shape shape = t.sizes();
  shape[dim] = idx.numel();
  Tensor out = empty(shape, TensorOptions(t.dtype(), t.device()));
  kernel_for(&KernelTable::index_select, "index_select", {&out, &t, &idx})(out, t, dim, idx);
  return out;
}

const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (auto f = autograd_kernel(&AutogradKernels::index_add_, {&self, &src})) {
    return f(self, dim, index, src);
  }
  check_dense("index_add_", {&self, &index, &src});
  EMBER_CHECK(index.dim() <= 1, "index_add_: index must be 0-d or 1-d, got ", index.describe());
  Tensor idx = index_as_int64("index_add_", index).reshape({-1});
  dim = wrap_dim(dim, self.dim(), "index_add_");
  Shape expect = self.sizes();
  if (self.dim() > 0) expect[dim] = idx.numel();
  EMBER_CHECK(src.sizes() == expect, "index_add_: src ", src.describe(), " must have shape ",
              shape_to_string(expect), " for self ", self.describe(), " and ", idx.numel(),
              " indices");
  const bool scalar = self.dim() == 0;  // a 0-d self is a 1-element row
  const Tensor s = scalar ? self.view({1}) : self;
  const Tensor from = (scalar ? src.view({1}) : src).to(self.dtype());
  check_index_range("index_add_", idx, s.sizes()[dim], dim);
  kernel_for(&KernelTable::index_add, "index_add_", {&s, &idx, &from})(s, dim, idx, from);
  self.bump_version();
  return self;
}

Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  if (auto f = autograd_kernel(&AutogradKernels::gather, {&t})) return f(t, dim, index);
  check_dense("gather", {&t, &index});
  Tensor idx = index_as_int64("gather", index);
  if (t.dim() == 0) {
    wrap_dim(dim, 0, "gather");
    EMBER_CHECK(idx.numel() == 1, "gather: a 0-dim input needs exactly one index");
    check_index_range("gather", idx, 1, 0);
    return t.clone().view(idx.sizes());
  }
  dim = wrap_dim(dim, t.dim(), "gather");
  check_index_shape("gather", t, idx, dim, nullptr);
  check_index_range("gather", idx, t.sizes()[dim], dim);
  Tensor out = empty(idx.sizes(), TensorOptions(t.dtype(), t.device()));
  kernel_for(&KernelTable::gather, "gather", {&out, &t, &idx})(out, t, dim, idx);
  return out;
}

const Tensor& scatter_add_(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  check_dense("scatter_add_", {&t, &index, &src});
  EMBER_CHECK(src.dtype() == t.dtype(), "scatter_add_: self ", t.describe(), " and src ",
              src.describe(), " must have the same dtype");
  EMBER_CHECK(t.dtype() != kBool, "scatter_add_: not supported for bool tensors (", t.describe(),
              ")");
  Tensor idx = index_as_int64("scatter_add_", index);
  EMBER_CHECK(t.dim() > 0, "scatter_add_: self must have at least one dimension");
  dim = wrap_dim(dim, t.dim(), "scatter_add_");
  EMBER_CHECK(src.dim() == t.dim(), "scatter_add_: src ", src.describe(),
              " must have as many dims as self ", t.describe());
  check_index_shape("scatter_add_", t, idx, dim, &src);
  check_index_range("scatter_add_", idx, t.sizes()[dim], dim);
  kernel_for(&KernelTable::scatter_add, "scatter_add_", {&t, &idx, &src})(t, dim, idx, src);
  t.bump_version();
  return t;
}

Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  if (auto f = autograd_kernel(&AutogradKernels::scatter_add, {&t, &src})) return f(t, dim, index, src);
  Tensor out = clone(t);
  scatter_add_(out, dim, index, src);
  return out;
}

Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  check_dense("one_hot", {&labels});
  EMBER_CHECK(labels.dtype() == kInt64, "one_hot: labels must be an int64 tensor, got ",
              labels.describe());
  if (num_classes < 0) {
    EMBER_CHECK(labels.numel() > 0, "one_hot: cannot infer num_classes from an empty tensor");
    num_classes = max(labels).item<int64_t>() + 1;
  }
  Shape shape = labels.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, TensorOptions(kInt64, labels.device()));
  if (labels.numel() == 0) return out;
  const int64_t lo = min(labels).item<int64_t>(), hi = max(labels).item<int64_t>();
  EMBER_CHECK(lo >= 0 && hi < num_classes, "one_hot: class value ", lo < 0 ? lo : hi,
              " out of range [0, ", num_classes, ")");
  Tensor column = labels.unsqueeze(-1);
  return scatter_add_(out, -1, column,
                      ones(column.sizes(), TensorOptions(kInt64, labels.device())));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_dense("allclose", {&a, &b});
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "allclose");
  // A yes/no answer has to reach the host anyway: compare host copies.
  Tensor x = a.to(kFloat64).cpu().expand(shape), y = b.to(kFloat64).cpu().expand(shape);
  bool ok = true;
  cpu::for_each_strided<2>(shape, {&x, &y},
                           [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                             for (int64_t i = 0; i < n && ok; ++i) {
                               const double u = *reinterpret_cast<double*>(p[0] + i * s[0]);
                               const double v = *reinterpret_cast<double*>(p[1] + i * s[1]);
                               if (std::isnan(u) || std::isnan(v)) {
                                 ok = equal_nan && std::isnan(u) && std::isnan(v);
                               } else if (u != v) {  // equal infinities are close
                                 ok = std::isfinite(u) && std::isfinite(v) &&
                                      std::fabs(u - v) <= atol + rtol * std::fabs(v);
                               }
                             }
                           });
  return ok;
}

bool equal(const Tensor& a, const Tensor& b) {
  check_dense("equal", {&a, &b});
  if (a.sizes() != b.sizes()) return false;
  Tensor same = eq(a, b).cpu().contiguous();
  const bool* p = same.data_ptr<bool>();
  for (int64_t i = 0; i < same.numel(); ++i) {
    if (!p[i]) return false;
  }
  return true;
}

}  // namespace ember
