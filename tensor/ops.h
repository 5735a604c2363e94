// The tensor library's operations as free functions (PyTorch's at:: namespace). Elementwise ops
// broadcast NumPy-style and promote dtypes like PyTorch; every bad input throws ember::Error naming
// the op and the shapes/dtypes/devices involved.
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "tensor/tensor.h"

namespace ember {

// ---- shapes ------------------------------------------------------------------------------------
// The broadcast shape of a and b; throws naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");
// Wraps a possibly-negative dim into [0, ndim); throws naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// ---- views -------------------------------------------------------------------------------------
Tensor view(const Tensor& t, const Shape& sizes);
Tensor reshape(const Tensor& t, const Shape& sizes);
Tensor permute(const Tensor& t, const Shape& dims);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Shape& sizes);
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides,
                  int64_t storage_offset = -1);
Tensor contiguous(const Tensor& t);
// torch.split with an int size: views of `split_size` along dim, the last one shorter when the
// size does not divide.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);

// ---- copies and conversion ---------------------------------------------------------------------
// Copies src into dst (broadcasting src, converting dtype, across devices).
const Tensor& copy_(const Tensor& dst, const Tensor& src);
// non_blocking: a copy between pinned host memory and a device may return before it finishes
// (see DeviceBackend::copy_bytes); synchronise before using the host side.
const Tensor& copy_(const Tensor& dst, const Tensor& src, bool non_blocking);
Tensor to_dtype(const Tensor& t, ScalarType dtype, bool copy = false);
Tensor to_device(const Tensor& t, Device device, bool copy = false);
Tensor to_device(const Tensor& t, Device device, bool copy, bool non_blocking);
// A copy of a CPU tensor in page-locked memory (needs a CUDA backend), and whether t is in such.
// Pinned blocks come from a cache (cuda_host_memory_stats() in tensor/device_backend.h).
Tensor pin_memory(const Tensor& t);
// An uninitialised contiguous CPU tensor in page-locked memory (torch.empty(pin_memory=True)).
Tensor empty_pinned(const Shape& sizes, ScalarType dtype);
bool is_pinned(const Tensor& t);
Tensor clone(const Tensor& t);
const Tensor& fill_(const Tensor& t, const Scalar& value);
const Tensor& zero_(const Tensor& t);

// ---- elementwise binary ------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
// True division: integer inputs give a float32 result, as in PyTorch.
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Scalar& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor rsub(const Tensor& a, const Scalar& b);  // b - a
Tensor rdiv(const Tensor& a, const Scalar& b);  // b / a
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);

// cond ? a : b, all three broadcast together; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Tensor.masked_fill: `value` where the bool mask (broadcast to t's shape) is true, t elsewhere.
Tensor masked_fill(const Tensor& t, const Tensor& mask, const Scalar& value);

// In place into `self` (other must broadcast to self's shape; result dtype must cast to self's).
const Tensor& add_(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
const Tensor& sub_(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
const Tensor& mul_(const Tensor& self, const Tensor& other);
const Tensor& div_(const Tensor& self, const Tensor& other);
const Tensor& add_(const Tensor& self, const Scalar& other);
const Tensor& mul_(const Tensor& self, const Scalar& other);
const Tensor& div_(const Tensor& self, const Scalar& other);
// Into `out`, PyTorch's out= form: out = self * other in one pass (DDP scales a gradient by 1/world
// while copying it into its bucket). `out` has self's shape and device; a result of another dtype
// is cast to out's, which must hold its category. Not differentiable: refuses operands that
// require grad while grad mode is on.
const Tensor& mul_out(const Tensor& out, const Tensor& self, const Scalar& other);

// ---- elementwise unary -------------------------------------------------------------------------
Tensor neg(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor rsqrt(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor relu(const Tensor& t);
// In place, as torch.relu_ / nn.ReLU(inplace=True): autograd saves the result, not the input.
const Tensor& relu_(const Tensor& t);
// PyTorch's threshold_backward: grad_output where self > threshold, 0 elsewhere (a NaN in self
// passes its gradient on), in one pass; relu's gradient is threshold_backward(grad, result, 0).
// The operands broadcast and promote as in a binary op. Not differentiable itself: ember computes
// no higher-order gradients, so it refuses operands that require grad while grad mode is on.
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold);
Tensor sigmoid(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sign(const Tensor& t);
Tensor clamp(const Tensor& t, std::optional<Scalar> min, std::optional<Scalar> max);

// ---- reductions --------------------------------------------------------------------------------
// An empty `dims` list reduces over every dimension.
Tensor sum(const Tensor& t, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& t, const Shape& dims = {}, bool keepdim = false);
Tensor var(const Tensor& t, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor max(const Tensor& t);
Tensor min(const Tensor& t);
std::tuple<Tensor, Tensor> max(const Tensor& t, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& t);
Tensor argmax(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim = false);

// ---- linear algebra ----------------------------------------------------------------------------
Tensor mm(const Tensor& a, const Tensor& b);
// PyTorch's matmul: 1-d dot/mv, 2-d mm, batched with broadcasting of the batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * self + alpha * (m1 @ m2); self broadcasts to [n, p].
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, const Scalar& beta = 1,
             const Scalar& alpha = 1);

// ---- joining and indexing ----------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index);
// Out-of-place: a copy of t with src added at index along dim.
Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
const Tensor& scatter_add_(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
// index_add_: self[index[i]] += src[i] along dim (the backward of index_select).
const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// int64 labels -> int64 one-hot with num_classes (-1: max label + 1).
Tensor one_hot(const Tensor& labels, int64_t num_classes = -1);

// ---- comparison --------------------------------------------------------------------------------
// |a - b| <= atol + rtol * |b| elementwise (broadcasting), NaNs equal only if equal_nan.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);  // same shape and identical values

}  // namespace ember
