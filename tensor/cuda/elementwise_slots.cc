// The CUDA table's elementwise slots (binary, unary, clamp, where, copy, fill), filled at static
// initialisation from elementwise_kernels.cu and copy_kernels.cu.
#include "tensor/cuda/slot_glue.h"

namespace ember::cuda {
namespace {

static_assert(static_cast<int>(BinaryKind::kThresholdBackward) ==
                      static_cast<int>(BinaryOp::kThresholdBackward) &&
                  static_cast<int>(BinaryKind::kGe) == static_cast<int>(BinaryOp::kGe) &&
                  static_cast<int>(UnaryKind::kGeluTanhDerivative) ==
                      static_cast<int>(UnaryOp::kGeluTanhDerivative),
              "launch.h's kinds must follow tensor/kernels.h's ops");

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
  EMBER_CHECK(op < UnaryOp::kExp || is_floating_point(in.dtype()), name,
              ": expects a floating tensor, got ", in.describe());
  DeviceGuard guard(out.device().index);
  check_launch(launch_unary(static_cast<UnaryKind>(op), dtype_of(in), out.data_ptr(), in.data_ptr(),
                            make_indexer(name, {&out, &in}), out.numel(), stream_of(out)),
               name, out);
}

void clamp_cuda(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                const std::optional<Scalar>& hi) {
  DeviceGuard guard(out.device().index);
  check_launch(
      launch_clamp(dtype_of(in), out.data_ptr(), in.data_ptr(), make_indexer("clamp", {&out, &in}),
                   out.numel(), lo.has_value(), lo ? scalar_arg(*lo) : ScalarArg{}, hi.has_value(),
                   hi ? scalar_arg(*hi) : ScalarArg{}, stream_of(out)),
      "clamp", out);
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  DeviceGuard guard(out.device().index);
  check_launch(
      launch_where(dtype_of(out), out.data_ptr(), static_cast<const bool*>(cond.data_ptr()),
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
  KernelTable& table = kernel_table(DeviceType::kCUDA);
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
