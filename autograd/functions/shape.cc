// Backward formulas for views and copies: each maps the gradient back through the view.
#include "autograd/functions/function_node.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::autograd {
namespace {

using Needs = std::vector<bool>;

// Views whose gradient is the output gradient reshaped to the input's shape.
Tensor reshaping_view(const char* name, const Tensor& t, const std::function<Tensor()>& forward) {
  const Shape in_shape = t.sizes();
  RecordSpec spec{name, {t}};
  spec.is_view = true;
  return record_op(spec, forward,
                   [in_shape](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {g.reshape(in_shape)};
                   });
}

}  // namespace

void register_shape_formulas(AutogradKernels& k) {
  k.view = [](const Tensor& t, const Shape& sizes) {
    return reshaping_view("ViewBackward", t, [&] { return view(t, sizes); });
  };
  k.squeeze = [](const Tensor& t) { return reshaping_view("SqueezeBackward", t, [&] { return squeeze(t); }); };
  k.squeeze_dim = [](const Tensor& t, int64_t d) {
    return reshaping_view("SqueezeBackward", t, [&] { return squeeze(t, d); });
  };
  k.unsqueeze = [](const Tensor& t, int64_t d) {
    return reshaping_view("UnsqueezeBackward", t, [&] { return unsqueeze(t, d); });
  };
  k.permute = [](const Tensor& t, const Shape& dims) {
    Shape inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], t.dim(), "permute")] = static_cast<int64_t>(i);
    RecordSpec spec{"PermuteBackward", {t}};
    spec.is_view = true;
    return record_op(spec, [&] { return permute(t, dims); },
                     [inverse](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {g.permute(inverse)};
                     });
  };
  k.transpose = [](const Tensor& t, int64_t d0, int64_t d1) {
    RecordSpec spec{"TransposeBackward", {t}};
    spec.is_view = true;
    return record_op(spec, [&] { return transpose(t, d0, d1); },
                     [d0, d1](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {g.transpose(d0, d1)};
                     });
  };
  k.slice = [](const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
    const Shape in_shape = t.sizes();
    RecordSpec spec{"SliceBackward", {t}};
    spec.is_view = true;
    return record_op(spec, [&] { return slice(t, dim, start, end, step); },
                     [=](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       Tensor gi = zeros(in_shape, TensorOptions(g.dtype(), g.device()));
                       copy_(gi.slice(dim, start, end, step), g);
                       return {gi};
                     });
  };
  k.select = [](const Tensor& t, int64_t dim, int64_t index) {
    const Shape in_shape = t.sizes();
    RecordSpec spec{"SelectBackward", {t}};
    spec.is_view = true;
    return record_op(spec, [&] { return select(t, dim, index); },
                     [=](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       Tensor gi = zeros(in_shape, TensorOptions(g.dtype(), g.device()));
                       copy_(gi.select(dim, index), g);
                       return {gi};
                     });
  };
  k.expand = [](const Tensor& t, const Shape& sizes) {
    RecordSpec spec{"ExpandBackward", {t}};
    spec.is_view = true;
    // The engine sums the gradient back to the input's shape.
    return record_op(spec, [&] { return expand(t, sizes); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {g}; });
  };
  k.as_strided = [](const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
    const Shape in_sizes = t.sizes(), in_strides = t.strides();
    const int64_t in_offset = t.storage_offset();
    const int64_t storage_numel = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
    const int64_t out_offset = offset < 0 ? in_offset : offset;
    RecordSpec spec{"AsStridedBackward", {t}};
    spec.is_view = true;
    // Scatter the gradient into a zero buffer shaped like the storage, then read the input's
    // geometry back out (exact when the input does not overlap itself).
    return record_op(spec, [&] { return as_strided(t, sizes, strides, offset); },
                     [=](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       Tensor buf = zeros({storage_numel}, TensorOptions(g.dtype(), g.device()));
                       add_(buf.as_strided(sizes, strides, out_offset), g);
                       return {buf.as_strided(in_sizes, in_strides, in_offset).clone()};
                     });
  };
  k.clone = [](const Tensor& t) {
    return record_op({"CloneBackward", {t}}, [&] { return clone(t); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {g}; });
  };
  k.to_dtype = [](const Tensor& t, ScalarType dtype, bool copy) {
    // The engine casts the gradient back to the input's dtype.
    return record_op({"ToCopyBackward", {t}}, [&] { return to_dtype(t, dtype, copy); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {g}; });
  };
}

}  // namespace ember::autograd
