// Fills ember::kernel_table(DeviceType::CUDA) at static initialisation with the launchers of
// tensor/cuda/*.cu: this file turns Tensors into the plain pointers, dtypes and Indexers those take,
// checks what the kernels cannot, and reports launch failures with the op and its operands.
#include <algorithm>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/current_stream.h"
#include "tensor/cuda/launch.h"
#include "tensor/kernels.h"

namespace ember::cuda {
namespace {

static_assert(static_cast<int>(DType::Bool) == static_cast<int>(ScalarType::Bool) &&
                  static_cast<int>(DType::Float16) == static_cast<int>(ScalarType::Float16) &&
                  static_cast<int>(DType::UInt8) == static_cast<int>(ScalarType::UInt8),
              "launch.h's DType must follow ScalarType");
static_assert(static_cast<int>(BinaryKind::Ge) == static_cast<int>(BinaryOp::Ge) &&
                  static_cast<int>(UnaryKind::Tanh) == static_cast<int>(UnaryOp::Tanh),
              "launch.h's kinds must follow tensor/kernels.h's ops");

DType dtype_of(const Tensor& t) { return static_cast<DType>(t.dtype()); }

ScalarArg scalar_arg(const Scalar& s) {
  ScalarArg a;
  a.f = s.to_double();
  a.i = s.to<int64_t>();
  a.b = s.to<bool>();
  return a;
}

// The Indexer of an elementwise kernel over operands[0]'s shape (the others already expanded to
// it): size-1 dims dropped, and neighbouring dims merged where every operand is contiguous across
// them, so a dense tensor is one dim and each thread's offset costs one division.
Indexer make_indexer(const char* op, std::initializer_list<const Tensor*> operands) {
  const Tensor& out = **operands.begin();
  Indexer ix;
  const int nops = static_cast<int>(operands.size());
  EMBER_INTERNAL_ASSERT(nops <= kMaxOperands);
  for (int d = 0; d < out.dim(); ++d) {
    const int64_t size = out.size(d);
    if (size == 1) continue;
    int k = 0;
    bool merge = ix.ndim > 0;
    for (const Tensor* t : operands) {
      merge = merge && ix.strides[k][ix.ndim - 1] == t->stride(d) * size;
      ++k;
    }
    if (merge) {
      ix.sizes[ix.ndim - 1] *= size;
      k = 0;
      for (const Tensor* t : operands) ix.strides[k++][ix.ndim - 1] = t->stride(d);
      continue;
    }
    EMBER_CHECK(ix.ndim < kMaxDims, "no CUDA kernel for ", op, " over ", out.describe(),
                ": more than ", kMaxDims, " dims that cannot be merged");
    ix.sizes[ix.ndim] = size;
    k = 0;
    for (const Tensor* t : operands) ix.strides[k++][ix.ndim] = t->stride(d);
    ++ix.ndim;
  }
  if (ix.ndim == 0) {  // a single element
    ix.sizes[0] = 1;
    for (int k = 0; k < nops; ++k) ix.strides[k][0] = 0;
    ix.ndim = 1;
  }
  return ix;
}

void check_launch(int error, const char* op, const Tensor& out) {
  CUDA_CHECK(static_cast<cudaError_t>(error), " launching ", op, " for ", out.describe());
}

cudaStream_t stream_of(const Tensor& t) { return current_stream(t.device().index); }

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                 const Scalar& alpha) {
  const char* name = binary_op_name(op);
  check_binary_operands(op, a.dtype(), alpha);
  DeviceGuard guard(out.device().index);
  check_launch(launch_binary(static_cast<BinaryKind>(op), dtype_of(a), out.data_ptr(), a.data_ptr(),
                             b.data_ptr(), make_indexer(name, {&out, &a, &b}), out.numel(),
                             scalar_arg(alpha), stream_of(out)),
               name, out);
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  const char* name = unary_op_name(op);
  EMBER_CHECK(in.dtype() != kBool, name, ": not supported for bool tensors (", in.describe(), ")");
  EMBER_CHECK(op < UnaryOp::Exp || is_floating_point(in.dtype()), name,
              ": expects a floating tensor, got ", in.describe());
  DeviceGuard guard(out.device().index);
  check_launch(launch_unary(static_cast<UnaryKind>(op), dtype_of(in), out.data_ptr(), in.data_ptr(),
                            make_indexer(name, {&out, &in}), out.numel(), stream_of(out)),
               name, out);
}

void clamp_cuda(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                const std::optional<Scalar>& hi) {
  DeviceGuard guard(out.device().index);
  check_launch(launch_clamp(dtype_of(in), out.data_ptr(), in.data_ptr(),
                            make_indexer("clamp", {&out, &in}), out.numel(), lo.has_value(),
                            lo ? scalar_arg(*lo) : ScalarArg{}, hi.has_value(),
                            hi ? scalar_arg(*hi) : ScalarArg{}, stream_of(out)),
               "clamp", out);
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  DeviceGuard guard(out.device().index);
  check_launch(launch_where(dtype_of(out), out.data_ptr(), static_cast<const bool*>(cond.data_ptr()),
                            a.data_ptr(), b.data_ptr(), make_indexer("where", {&out, &cond, &a, &b}),
                            out.numel(), stream_of(out)),
               "where", out);
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  DeviceGuard guard(dst.device().index);
  check_launch(launch_copy(dtype_of(dst), dtype_of(src), dst.data_ptr(), src.data_ptr(),
                           make_indexer("copy_", {&dst, &src}), dst.numel(), stream_of(dst)),
               "copy_", dst);
}

void fill_cuda(const Tensor& t, const Scalar& value) {
  DeviceGuard guard(t.device().index);
  check_launch(launch_fill(dtype_of(t), t.data_ptr(), make_indexer("fill_", {&t}), t.numel(),
                           scalar_arg(value), stream_of(t)),
               "fill_", t);
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::CUDA);
  table.binary = binary_cuda;
  table.unary = unary_cuda;
  table.clamp = clamp_cuda;
  table.where = where_cuda;
  table.copy = copy_cuda;
  table.fill = fill_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
