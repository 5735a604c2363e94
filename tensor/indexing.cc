// Joining and indexing: cat, stack, index_select, index_add_, gather, scatter_add, one_hot, and
// the allclose/equal comparisons. CPU only for now: other devices get "no <device> kernel for <op>".
#include <cmath>
#include <cstring>

#include "tensor/autograd_dispatch.h"
#include "tensor/cpu/convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember {
namespace {

void check_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    EMBER_CHECK(t->defined(), op, ": got an undefined tensor");
    EMBER_CHECK(!t->is_sparse(), op, ": sparse tensors are not supported (got ", t->describe(), ")");
    EMBER_CHECK(t->is_cpu(), "no ", t->device().str(), " kernel for ", op, " (got ", t->describe(),
                ")");
  }
}

// Index tensors are int64 (int32 accepted and widened), returned contiguous.
Tensor index_as_int64(const char* op, const Tensor& index) {
  EMBER_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op,
              ": index must be an int64 or int32 tensor, got ", index.describe());
  return index.to(kInt64).contiguous();
}

int64_t checked_index(const char* op, int64_t idx, int64_t size, int64_t dim) {
  EMBER_CHECK(idx >= -size && idx < size, op, ": index ", idx,
              " is out of bounds for dimension ", dim, " with size ", size);
  return idx < 0 ? idx + size : idx;
}

// `t` viewed with index's shape and a zero stride along `dim`: the base address for each position.
Tensor base_view(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return t.as_strided(shape, strides, t.storage_offset());
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
    check_cpu("cat", {&t});
    dt = promote_types(dt, t.dtype());
    if (t.dim() == 1 && t.numel() == 0) continue;
    parts.push_back(&t);
  }
  if (parts.empty()) return empty({0}, dt);
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
  Tensor out = empty(shape, dt);
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
  check_cpu("index_select", {&t, &index});
  EMBER_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got ", index.describe());
  Tensor idx = index_as_int64("index_select", index);
  if (t.dim() == 0) {
    dim = wrap_dim(dim, 0, "index_select");
    EMBER_CHECK(idx.numel() == 1, "index_select: a 0-dim input needs exactly one index");
    checked_index("index_select", idx.data_ptr<int64_t>()[0], 1, 0);
    return t.clone();
  }
  dim = wrap_dim(dim, t.dim(), "index_select");
  const int64_t n = idx.numel(), size = t.sizes()[dim];
  const int64_t* ip = idx.data_ptr<int64_t>();
  Shape shape = t.sizes();
  shape[dim] = n;
  Tensor out = empty(shape, t.dtype());
  if (dim == 0 && t.is_contiguous()) {
    // Rows are contiguous blocks: one memcpy each (the Embedding lookup path).
    const size_t row = t.numel() == 0 ? 0 : t.nbytes() / static_cast<size_t>(size);
    const char* src = static_cast<const char*>(t.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = checked_index("index_select", ip[i], size, dim);
      if (row) std::memcpy(dst + i * row, src + j * row, row);
    }
    return out;
  }
  for (int64_t i = 0; i < n; ++i) {
    copy_(out.select(dim, i), t.select(dim, checked_index("index_select", ip[i], size, dim)));
  }
  return out;
}

const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (auto f = autograd_kernel(&AutogradKernels::index_add_, {&self, &src})) return f(self, dim, index, src);
  check_cpu("index_add_", {&self, &index, &src});
  EMBER_CHECK(index.dim() <= 1, "index_add_: index must be 0-d or 1-d, got ", index.describe());
  Tensor idx = index_as_int64("index_add_", index);
  dim = wrap_dim(dim, self.dim(), "index_add_");
  Shape expect = self.sizes();
  if (self.dim() > 0) expect[dim] = idx.numel();
  EMBER_CHECK(src.sizes() == expect, "index_add_: src ", src.describe(), " must have shape ",
              shape_to_string(expect), " for self ", self.describe(), " and ", idx.numel(),
              " indices");
  const int64_t* ip = idx.data_ptr<int64_t>();
  const int64_t size = self.dim() > 0 ? self.sizes()[dim] : 1;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t j = checked_index("index_add_", ip[i], size, dim);
    if (self.dim() == 0) {
      add_(self, src);
    } else {
      add_(self.select(dim, j), src.select(dim, i));
    }
  }
  return self;
}

Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  if (auto f = autograd_kernel(&AutogradKernels::gather, {&t})) return f(t, dim, index);
  check_cpu("gather", {&t, &index});
  Tensor idx = index_as_int64("gather", index);
  if (t.dim() == 0) {
    wrap_dim(dim, 0, "gather");
    EMBER_CHECK(idx.numel() == 1, "gather: a 0-dim input needs exactly one index");
    checked_index("gather", idx.data_ptr<int64_t>()[0], 1, 0);
    return t.clone().view(idx.sizes());
  }
  dim = wrap_dim(dim, t.dim(), "gather");
  check_index_shape("gather", t, idx, dim, nullptr);
  Tensor out = empty(idx.sizes(), t.dtype());
  Tensor base = base_view(t, idx.sizes(), dim);
  const int64_t size = t.sizes()[dim];
  const int64_t step = t.strides()[dim] * static_cast<int64_t>(t.element_size());
  const size_t es = t.element_size();
  cpu::for_each_strided<3>(idx.sizes(), {&out, &idx, &base},
                           [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                             for (int64_t i = 0; i < n; ++i) {
                               const int64_t j = checked_index(
                                   "gather", *reinterpret_cast<int64_t*>(p[1] + i * s[1]), size, dim);
                               std::memcpy(p[0] + i * s[0], p[2] + i * s[2] + j * step, es);
                             }
                           });
  return out;
}

const Tensor& scatter_add_(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  check_cpu("scatter_add_", {&t, &index, &src});
  EMBER_CHECK(src.dtype() == t.dtype(), "scatter_add_: self ", t.describe(), " and src ",
              src.describe(), " must have the same dtype");
  Tensor idx = index_as_int64("scatter_add_", index);
  EMBER_CHECK(t.dim() > 0, "scatter_add_: self must have at least one dimension");
  dim = wrap_dim(dim, t.dim(), "scatter_add_");
  EMBER_CHECK(src.dim() == t.dim(), "scatter_add_: src ", src.describe(),
              " must have as many dims as self ", t.describe());
  check_index_shape("scatter_add_", t, idx, dim, &src);
  Tensor base = base_view(t, idx.sizes(), dim);
  Tensor src_v = src.as_strided(idx.sizes(), src.strides(), src.storage_offset());
  const int64_t size = t.sizes()[dim];
  const int64_t step = t.strides()[dim] * static_cast<int64_t>(t.element_size());
  EMBER_DISPATCH_NUMERIC_TYPES(t.dtype(), "scatter_add_", [&] {
    using T = scalar_t;
    cpu::for_each_strided<3>(idx.sizes(), {&base, &idx, &src_v},
                             [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                               for (int64_t i = 0; i < n; ++i) {
                                 const int64_t j = checked_index(
                                     "scatter_add_", *reinterpret_cast<int64_t*>(p[1] + i * s[1]),
                                     size, dim);
                                 T* o = reinterpret_cast<T*>(p[0] + i * s[0] + j * step);
                                 *o = T(cpu::opmath_t<T>(*o) +
                                        cpu::opmath_t<T>(*reinterpret_cast<T*>(p[2] + i * s[2])));
                               }
                             });
  });
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
  check_cpu("one_hot", {&labels});
  EMBER_CHECK(labels.dtype() == kInt64, "one_hot: labels must be an int64 tensor, got ",
              labels.describe());
  Tensor l = labels.contiguous();
  const int64_t* lp = l.data_ptr<int64_t>();
  if (num_classes < 0) {
    EMBER_CHECK(l.numel() > 0, "one_hot: cannot infer num_classes from an empty tensor");
    num_classes = 0;
    for (int64_t i = 0; i < l.numel(); ++i) num_classes = std::max(num_classes, lp[i] + 1);
  }
  Shape shape = l.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, kInt64);
  int64_t* op = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < l.numel(); ++i) {
    EMBER_CHECK(lp[i] >= 0 && lp[i] < num_classes, "one_hot: class value ", lp[i],
                " out of range [0, ", num_classes, ")");
    op[i * num_classes + lp[i]] = 1;
  }
  return out;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_cpu("allclose", {&a, &b});
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "allclose");
  Tensor x = a.to(kFloat64).expand(shape), y = b.to(kFloat64).expand(shape);
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
  check_cpu("equal", {&a, &b});
  if (a.sizes() != b.sizes()) return false;
  Tensor same = eq(a, b).contiguous();
  const bool* p = same.data_ptr<bool>();
  for (int64_t i = 0; i < same.numel(); ++i) {
    if (!p[i]) return false;
  }
  return true;
}

}  // namespace ember
