// The device-dispatch seam: one kernel table per device type. Ops in tensor/*.cc check inputs,
// broadcast, promote dtypes and allocate outputs, then call the table of the inputs' device. CPU
// kernels come from tensor/cpu/; the CUDA backend fills its own table (tensor/cuda/, --config=cuda).
// An empty slot throws "no CUDA kernel for <op>".
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace ember {

namespace cpu {
struct ConvGeometry;  // tensor/cpu/conv_geometry.h
}

enum class BinaryOp { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };
enum class UnaryOp { Neg, Abs, Relu, Sign, Exp, Log, Sqrt, Rsqrt, Sigmoid, Tanh };
enum class ReduceOp { Sum, Max, Min, ArgMax, ArgMin };

const char* binary_op_name(BinaryOp op);
const char* unary_op_name(UnaryOp op);

// Batch-norm data viewed as contiguous [N, C, inner].
struct BatchNormShape {
  int64_t N, C, inner;
};
// grad_input = a[c] * grad_out - b[c] - d[c] * (input - mean[c]) (training); with b == nullptr,
// grad_input = a[c] * grad_out (eval: statistics are constants). Arrays of C doubles.
struct BatchNormBackwardCoefficients {
  const double* a = nullptr;
  const double* b = nullptr;
  const double* d = nullptr;
  const double* mean = nullptr;
};

struct KernelTable {
  // out = a (op) b. a and b share a dtype and are broadcast (expanded) to out's shape; out has
  // that dtype too, except for comparisons, where it is bool. alpha scales b for Add and Sub.
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                 const Scalar& alpha) = nullptr;
  // out = op(in); same dtype and shape.
  void (*unary)(UnaryOp op, const Tensor& out, const Tensor& in) = nullptr;
  void (*clamp)(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                const std::optional<Scalar>& hi) = nullptr;
  // out = cond ? a : b, all expanded to out's shape; a, b and out share a dtype.
  void (*where)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = nullptr;
  // Reduces `in` over `reduce_mask` dims into out (out has in's rank, size 1 on reduced dims).
  // Sum accumulates in acc_t and writes out's dtype; Max/Min keep the dtype; Arg* write int64.
  void (*reduce)(ReduceOp op, const Tensor& out, const Tensor& in,
                 const std::vector<bool>& reduce_mask) = nullptr;
  // out[b] = beta * out[b] + alpha * a[b] @ b[b] for 3-d [batch, n, k] x [batch, k, m] inputs of
  // one floating dtype; out is contiguous [batch, n, m]. beta == 0 ignores out's contents.
  void (*batched_gemm)(const Tensor& out, const Tensor& a, const Tensor& b, double beta,
                       double alpha) = nullptr;
  // out [N, O, Ho, Wo] = conv2d(input, weight) + bias for contiguous float32/float64 operands of
  // geometry g (checked by the op); bias may be undefined.
  void (*conv2d)(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const cpu::ConvGeometry& g, int64_t groups) = nullptr;
  // Batch norm over contiguous float32/float64 [N, C, inner] tensors, per channel c:
  // mean[c] and biased var[c] of input;
  void (*batch_norm_stats)(const Tensor& input, const BatchNormShape& s, double* mean,
                           double* var) = nullptr;
  // out = input * scale[c] + shift[c];
  void (*batch_norm_transform)(const Tensor& out, const Tensor& input, const BatchNormShape& s,
                               const double* scale, const double* shift) = nullptr;
  // sum_g[c] = sum of grad_out, sum_gx[c] = sum of grad_out * (input - mean[c]);
  void (*batch_norm_backward_reduce)(const Tensor& grad_out, const Tensor& input,
                                     const BatchNormShape& s, const double* mean, double* sum_g,
                                     double* sum_gx) = nullptr;
  // grad_input from BatchNormBackwardCoefficients.
  void (*batch_norm_backward_transform)(const Tensor& grad_input, const Tensor& grad_out,
                                        const Tensor& input, const BatchNormShape& s,
                                        const BatchNormBackwardCoefficients& k) = nullptr;
  // The gradients of conv2d; an undefined grad_* is not computed.
  void (*conv2d_backward)(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                          const cpu::ConvGeometry& g, int64_t groups, const Tensor& grad_input,
                          const Tensor& grad_weight, const Tensor& grad_bias) = nullptr;
};

KernelTable& kernel_table(DeviceType type);
// Checks every tensor is on the same device and returns that device's table.
const KernelTable& kernels_for(const char* op, std::initializer_list<const Tensor*> tensors);

namespace cpu {
// The CPU table, filled from the kernels of cpu_capability_level() (tensor/cpu/capability.h).
KernelTable make_kernel_table();
}

}  // namespace ember
