// Fills ember::kernel_table(DeviceType::CUDA) at static initialisation: binary add/sub/mul/div and
// unary neg/relu on float32. Anything else throws "no CUDA kernel for <op> ..." naming the operands,
// so a missing kernel is an error message, never a silent CPU fallback.
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/launch.h"
#include "tensor/kernels.h"

namespace ember::cuda {
namespace {

// A dense operand, or one element broadcast to every position (all strides 0): the two layouts
// the kernels read. Returns the step between consecutive elements (1 or 0), or -1 for neither.
int64_t step_of(const Tensor& t) {
  if (t.is_contiguous()) return 1;
  for (int64_t s : t.strides()) {
    if (s != 0) return -1;
  }
  return 0;
}

void check_float32(const char* name, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    EMBER_CHECK(t->dtype() == kFloat32, "no CUDA kernel for ", name, " with dtype ", t->dtype(),
                " (", t->describe(), "); the CUDA backend covers float32 only");
  }
}

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                 const Scalar& alpha) {
  const char* name = binary_op_name(op);
  BinaryKind kind;
  switch (op) {
    case BinaryOp::Add: kind = BinaryKind::Add; break;
    case BinaryOp::Sub: kind = BinaryKind::Sub; break;
    case BinaryOp::Mul: kind = BinaryKind::Mul; break;
    case BinaryOp::Div: kind = BinaryKind::Div; break;
    default:
      EMBER_THROW("no CUDA kernel for ", name, " (", a.describe(), ", ", b.describe(),
                  "); CUDA has add, sub, mul and div");
  }
  check_float32(name, {&out, &a, &b});
  const int64_t a_step = step_of(a), b_step = step_of(b);
  EMBER_CHECK(out.is_contiguous() && a_step >= 0 && b_step >= 0, "no CUDA kernel for ", name,
              " on strided or partly broadcast operands (", a.describe(), " strides ",
              shape_to_string(a.strides()), ", ", b.describe(), " strides ",
              shape_to_string(b.strides()), "); make them contiguous first");
  DeviceGuard guard(out.device().index);
  CUDA_CHECK(static_cast<cudaError_t>(launch_binary_f32(
                 kind, static_cast<float*>(out.data_ptr()), static_cast<const float*>(a.data_ptr()),
                 a_step, static_cast<const float*>(b.data_ptr()), b_step, alpha.to<float>(),
                 out.numel(), nullptr)),
             " launching ", name, " on ", out.describe());
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  const char* name = unary_op_name(op);
  UnaryKind kind;
  switch (op) {
    case UnaryOp::Neg: kind = UnaryKind::Neg; break;
    case UnaryOp::Relu: kind = UnaryKind::Relu; break;
    default: EMBER_THROW("no CUDA kernel for ", name, " (", in.describe(), "); CUDA has neg and relu");
  }
  check_float32(name, {&out, &in});
  EMBER_CHECK(out.is_contiguous() && in.is_contiguous(), "no CUDA kernel for ", name,
              " on a strided tensor (", in.describe(), "); make it contiguous first");
  DeviceGuard guard(out.device().index);
  CUDA_CHECK(static_cast<cudaError_t>(launch_unary_f32(kind, static_cast<float*>(out.data_ptr()),
                                                       static_cast<const float*>(in.data_ptr()),
                                                       out.numel(), nullptr)),
             " launching ", name, " on ", out.describe());
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::CUDA);
  table.binary = binary_cuda;
  table.unary = unary_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
