// Views: new TensorImpls over the same storage, sharing the version counter. No data moves here.
#include <algorithm>
#include <optional>

#include "tensor/autograd_dispatch.h"
#include "tensor/ops.h"

namespace ember {
namespace {

Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(t.storage(), std::move(sizes), std::move(strides),
                                             offset, t.dtype(), t.unsafe_impl()->version_counter()));
}

// Resolves a single -1 and checks the element count.
Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape res = shape;
  int64_t infer = -1;
  int64_t prod = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK(infer < 0, op, ": shape ", shape_to_string(shape),
                  " is invalid: only one dimension can be inferred");
      infer = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(shape[i] >= 0, op, ": shape ", shape_to_string(shape),
                  " has a negative dimension");
      prod *= shape[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(prod != 0 && numel % prod == 0, op, ": shape ", shape_to_string(shape),
                " is invalid for input of size ", numel);
    res[infer] = numel / prod;
  } else {
    EMBER_CHECK(prod == numel, op, ": shape ", shape_to_string(shape),
                " is invalid for input of size ", numel);
  }
  return res;
}

// PyTorch's computeStride: strides for viewing (old sizes, strides) as new sizes without a copy,
// or nullopt when the memory layout does not allow it.
std::optional<Shape> compute_view_strides(const Shape& old_sizes, const Shape& old_strides,
                                          const Shape& new_sizes) {
  if (old_sizes.empty()) return Shape(new_sizes.size(), 1);
  const int64_t numel = shape_numel(old_sizes);
  if (numel == 0) return contiguous_strides(new_sizes);
  Shape new_strides(new_sizes.size(), 0);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  EMBER_CHECK(dim >= -n && dim < n, op, ": dimension ", dim, " out of range for a tensor with ",
              ndim, " dims (expected in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

Tensor view(const Tensor& t, const Shape& sizes) {
  if (auto f = autograd_kernel(&AutogradKernels::view, {&t})) return f(t, sizes);
  Shape s = infer_size("view", sizes, t.numel());
  auto strides = compute_view_strides(t.sizes(), t.strides(), s);
  EMBER_CHECK(strides.has_value(), "view: size ", shape_to_string(s),
              " is not compatible with input of size ", t.shape_str(), " and strides ",
              shape_to_string(t.strides()),
              " (at least one dimension spans two contiguous chunks); use reshape instead");
  return make_view(t, std::move(s), std::move(*strides), t.storage_offset());
}

Tensor reshape(const Tensor& t, const Shape& sizes) {
  // A view when the layout allows it, else a copy (both recorded by autograd through view/clone).
  Shape s = infer_size("reshape", sizes, t.numel());
  if (compute_view_strides(t.sizes(), t.strides(), s)) return view(t, s);
  return view(contiguous(t), s);
}

Tensor permute(const Tensor& t, const Shape& dims) {
  if (auto f = autograd_kernel(&AutogradKernels::permute, {&t})) return f(t, dims);
  const int64_t n = t.dim();
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: number of dims ",
              shape_to_string(dims), " does not match tensor ", t.describe());
  Shape sizes(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    EMBER_CHECK(!seen[d], "permute: dims ", shape_to_string(dims), " repeat dimension ", d);
    seen[d] = true;
    sizes[i] = t.sizes()[d];
    strides[i] = t.strides()[d];
  }
  return make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
}

Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  if (auto f = autograd_kernel(&AutogradKernels::transpose, {&t})) return f(t, d0, d1);
  const int64_t n = t.dim();
  if (n == 0) {
    wrap_dim(d0, n, "transpose");
    wrap_dim(d1, n, "transpose");
    return make_view(t, t.sizes(), t.strides(), t.storage_offset());
  }
  d0 = wrap_dim(d0, n, "transpose");
  d1 = wrap_dim(d1, n, "transpose");
  Shape sizes = t.sizes(), strides = t.strides();
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  EMBER_CHECK(t.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  dim = wrap_dim(dim, t.dim(), "narrow");
  const int64_t size = t.sizes()[dim];
  EMBER_CHECK(start >= -size && start <= size, "narrow: start ", start,
              " out of range for dimension ", dim, " of size ", size, " in ", t.describe());
  if (start < 0) start += size;
  EMBER_CHECK(length >= 0 && start + length <= size, "narrow: start (", start, ") + length (",
              length, ") exceeds dimension ", dim, " of size ", size, " in ", t.describe());
  return slice(t, dim, start, start + length, 1);
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  EMBER_CHECK(t.dim() > 0, "split: cannot split a 0-dim tensor");
  dim = wrap_dim(dim, t.dim(), "split");
  const int64_t size = t.sizes()[dim];
  EMBER_CHECK(split_size > 0 || (split_size == 0 && size == 0), "split: split_size ", split_size,
              " must be positive (0 only for an empty dimension); dimension ", dim, " of ",
              t.describe());
  std::vector<Tensor> parts;
  if (size == 0) return {t};
  for (int64_t start = 0; start < size; start += split_size) {
    parts.push_back(narrow(t, dim, start, std::min(split_size, size - start)));
  }
  return parts;
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (auto f = autograd_kernel(&AutogradKernels::slice, {&t})) return f(t, dim, start, end, step);
  EMBER_CHECK(t.dim() > 0, "slice: cannot slice a 0-dim tensor");
  dim = wrap_dim(dim, t.dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t size = t.sizes()[dim];
  // Python semantics: negative indices count from the end; out-of-range bounds are clamped.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = t.sizes(), strides = t.strides();
  sizes[dim] = (end - start + step - 1) / step;
  strides[dim] *= step;
  return make_view(t, std::move(sizes), std::move(strides),
                   t.storage_offset() + start * t.strides()[dim]);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  if (auto f = autograd_kernel(&AutogradKernels::select, {&t})) return f(t, dim, index);
  EMBER_CHECK(t.dim() > 0, "select: cannot select from a 0-dim tensor");
  dim = wrap_dim(dim, t.dim(), "select");
  const int64_t size = t.sizes()[dim];
  EMBER_CHECK(index >= -size && index < size, "select: index ", index,
              " out of range for dimension ", dim, " of size ", size, " in ", t.describe());
  if (index < 0) index += size;
  Shape sizes = t.sizes(), strides = t.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_view(t, std::move(sizes), std::move(strides),
                   t.storage_offset() + index * t.strides()[dim]);
}

Tensor expand(const Tensor& t, const Shape& sizes) {
  if (auto f = autograd_kernel(&AutogradKernels::expand, {&t})) return f(t, sizes);
  const int64_t n = static_cast<int64_t>(sizes.size());
  EMBER_CHECK(n >= t.dim(), "expand: the number of sizes provided (", n,
              ") must be at least the number of dimensions of ", t.describe());
  Shape out_sizes(n), out_strides(n);
  const int64_t lead = n - t.dim();
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t j = i - lead;
    if (j < 0) {
      EMBER_CHECK(sizes[i] >= 0, "expand: size -1 not allowed for new leading dimension ", i,
                  " (target ", shape_to_string(sizes), ")");
      out_sizes[i] = sizes[i];
      out_strides[i] = 0;
      continue;
    }
    const int64_t cur = t.sizes()[j];
    const int64_t want = sizes[i] == -1 ? cur : sizes[i];
    EMBER_CHECK(cur == want || cur == 1, "expand: the expanded size of the tensor (", want,
                ") must match the existing size (", cur, ") at non-singleton dimension ", i,
                ". Target sizes: ", shape_to_string(sizes), ". Tensor sizes: ", t.shape_str());
    out_sizes[i] = want;
    out_strides[i] = (cur == want) ? t.strides()[j] : 0;
  }
  return make_view(t, std::move(out_sizes), std::move(out_strides), t.storage_offset());
}

Tensor squeeze(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::squeeze, {&t})) return f(t);
  Shape sizes, strides;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.sizes()[i] == 1) continue;
    sizes.push_back(t.sizes()[i]);
    strides.push_back(t.strides()[i]);
  }
  return make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  if (auto f = autograd_kernel(&AutogradKernels::squeeze_dim, {&t})) return f(t, dim);
  if (t.dim() == 0) {
    wrap_dim(dim, 0, "squeeze");
    return make_view(t, {}, {}, t.storage_offset());
  }
  dim = wrap_dim(dim, t.dim(), "squeeze");
  if (t.sizes()[dim] != 1) return make_view(t, t.sizes(), t.strides(), t.storage_offset());
  Shape sizes = t.sizes(), strides = t.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  if (auto f = autograd_kernel(&AutogradKernels::unsqueeze, {&t})) return f(t, dim);
  dim = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Shape sizes = t.sizes(), strides = t.strides();
  const int64_t new_stride = dim < t.dim() ? sizes[dim] * strides[dim] : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, new_stride);
  return make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  start_dim = wrap_dim(start_dim, t.dim(), "flatten");
  end_dim = wrap_dim(end_dim, t.dim(), "flatten");
  EMBER_CHECK(start_dim <= end_dim, "flatten: start_dim (", start_dim,
              ") cannot come after end_dim (", end_dim, ")");
  Shape sizes(t.sizes().begin(), t.sizes().begin() + start_dim);
  int64_t prod = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) prod *= t.sizes()[i];
  sizes.push_back(prod);
  sizes.insert(sizes.end(), t.sizes().begin() + end_dim + 1, t.sizes().end());
  return reshape(t, sizes);
}

Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  if (auto f = autograd_kernel(&AutogradKernels::as_strided, {&t})) return f(t, sizes, strides, offset);
  EMBER_CHECK(sizes.size() == strides.size(), "as_strided: sizes ", shape_to_string(sizes),
              " and strides ", shape_to_string(strides), " differ in length");
  if (offset < 0) offset = t.storage_offset();
  int64_t max_index = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EMBER_CHECK(sizes[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride in sizes ",
                shape_to_string(sizes), " strides ", shape_to_string(strides));
    if (sizes[i] == 0) {
      max_index = -1;
      break;
    }
    max_index += (sizes[i] - 1) * strides[i];
  }
  const int64_t capacity = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  EMBER_CHECK(max_index < capacity, "as_strided: sizes ", shape_to_string(sizes), ", strides ",
              shape_to_string(strides), " and offset ", offset,
              " reach outside the storage of ", capacity, " elements");
  return make_view(t, sizes, strides, offset);
}

}  // namespace ember
