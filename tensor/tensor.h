// Tensor: a cheap handle (shared_ptr) to a TensorImpl. Copying a Tensor shares its storage and
// geometry; views return new handles over the same storage. The methods mirror PyTorch's C++ API
// and forward to the free functions in tensor/ops.h, where the kernels are dispatched by device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/scalar.h"
#include "tensor/storage.h"
#include "tensor/tensor_impl.h"

namespace ember {

// PyTorch's torch::Tensor: a shared handle to a TensorImpl, so copies share data and autograd
// state. A default-constructed Tensor is undefined (defined() is false): most methods throw on it.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata -------------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes().size()); }
  const Shape& sizes() const { return impl().sizes(); }
  const Shape& strides() const { return impl().strides(); }
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return impl().numel(); }
  ScalarType dtype() const { return impl().dtype(); }
  ScalarType scalar_type() const { return dtype(); }
  Device device() const { return impl().device(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  int64_t storage_offset() const { return impl().storage_offset(); }
  const Storage& storage() const { return impl().storage(); }
  size_t element_size() const { return ember::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const { return impl().is_contiguous(); }
  bool is_floating_point() const { return ember::is_floating_point(dtype()); }
  // True when both tensors view the same Storage (PyTorch's is_alias_of).
  bool is_alias_of(const Tensor& other) const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  uint32_t version() const { return impl().version_counter()->version; }
  void bump_version() const { ++impl().version_counter()->version; }

  void* data_ptr() const { return impl().data(); }
  // Typed pointer; throws if T does not match the dtype.
  template <typename T>
  T* data_ptr() const;
  // The single element of a one-element tensor, converted to T.
  template <typename T>
  T item() const;
  Scalar item() const;

  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  std::string str() const;            // values, PyTorch-style
  std::string shape_str() const;      // "[2, 3]"
  std::string describe() const;       // "float32[2, 3] on cpu" for error messages

  // ---- autograd (implemented by autograd/ through tensor/autograd_interface.h) -----------------
  bool requires_grad() const;
  // Marks a leaf as needing gradients (PyTorch's requires_grad_); returns *this.
  const Tensor& set_requires_grad(bool requires_grad = true) const;
  const Tensor& requires_grad_(bool requires_grad = true) const { return set_requires_grad(requires_grad); }
  // The accumulated gradient (undefined until a backward reaches this tensor).
  const Tensor& grad() const;
  Tensor& mutable_grad() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  // Gradients of this tensor w.r.t. graph leaves; `gradient` defaults to 1 for a one-element tensor.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Same data, no history, requires_grad false.
  Tensor detach() const;
  void retain_grad() const;
  bool retains_grad() const;
  // A hook on the gradient w.r.t. this tensor; may return a replacement (undefined = unchanged).
  uint64_t register_hook(std::function<Tensor(const Tensor&)> hook) const;
  void remove_hook(uint64_t handle) const;

  // ---- sparse COO (tensor/sparse.h) --------------------------------------------------------------
  Layout layout() const { return impl().layout(); }
  bool is_sparse() const { return layout() == Layout::kSparse; }

  // ---- conversion and copies ------------------------------------------------------------------
  Tensor to(ScalarType dtype, bool copy = false) const;
  Tensor to(Device device, bool copy = false) const;
  // torch's to(device, non_blocking=..., copy=...), arguments in ember's order.
  Tensor to(Device device, bool copy, bool non_blocking) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor clone() const;
  Tensor contiguous() const;
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& zero_() const;
  const Tensor& fill_(const Scalar& value) const;

  // ---- views (no copy) ------------------------------------------------------------------------
  Tensor view(const Shape& sizes) const;
  Tensor reshape(const Shape& sizes) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset = -1) const;

  // ---- elementwise ----------------------------------------------------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor add(const Scalar& other) const;
  Tensor sub(const Scalar& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  const Tensor& relu_() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor clamp(const Scalar& min, const Scalar& max) const;
  Tensor clamp_min(const Scalar& min) const;
  Tensor clamp_max(const Scalar& max) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Scalar& other) const;

  // In place: the result is written into this tensor (shapes must broadcast to this one's).
  const Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& add_(const Scalar& other) const;
  const Tensor& mul_(const Scalar& other) const;
  const Tensor& div_(const Scalar& other) const;

  // ---- reductions -----------------------------------------------------------------------------
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  // Variance with Bessel's correction by default (PyTorch's unbiased=True, correction=1).
  Tensor var(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  Tensor var(bool unbiased = true) const;

  // ---- linear algebra and indexing ------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;

 private:
  const TensorImpl& impl() const;
  std::shared_ptr<TensorImpl> impl_;
};

// Operators as in PyTorch; comparisons are methods (eq, lt, ...) to keep == for handles out of it.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);

std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string shape_to_string(const Shape& s);

// ---- template definitions ----------------------------------------------------------------------
// Instantiated once, in tensor.cc, for every element type (Note [CPU capability namespaces]:
// kernel files compiled for AVX-512 must not emit their own copies).
template <typename T>
T* Tensor::data_ptr() const {
  EMBER_CHECK(dtype_of<T>() == dtype(), "data_ptr<", dtype_name(dtype_of<T>()),
              ">: tensor has dtype ", dtype());
  return static_cast<T*>(data_ptr());
}
#define EMBER_EXTERN_DATA_PTR(cpp, st) extern template cpp* Tensor::data_ptr<cpp>() const;
EMBER_FORALL_CPP_TYPES(EMBER_EXTERN_DATA_PTR)
#undef EMBER_EXTERN_DATA_PTR

template <typename T>
T Tensor::item() const {
  return item().to<T>();
}

}  // namespace ember
