// The device-dispatch seam: one kernel table per device type. Ops in tensor/*.cc check inputs,
// broadcast, promote dtypes and allocate outputs, then call the table of the inputs' device. CPU
// kernels come from tensor/cpu/; the CUDA backend fills its own table (tensor/cuda/, --config=cuda).
// An empty slot throws "no CUDA kernel for <op>".
#pragma once

#include <optional>
#include <vector>

#include "tensor/fused_sgd.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ember {

namespace cpu {
struct ConvGeometry;  // tensor/cpu/conv_geometry.h
}

// ThresholdBackward is PyTorch's threshold_backward(grad = a, self = b, threshold = alpha):
// out = b <= alpha ? 0 : a, so a NaN b passes a on. Comparisons come last (Eq onwards).
enum class BinaryOp {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum, kThresholdBackward, kEq, kNe, kLt, kLe, kGt, kGe
};
// The floating ops start at kExp. kGelu* compute GELU (erf form, or tanh approximation) and
// kGelu*Derivative its derivative d gelu / dx, which the backward multiplies by the gradient.
enum class UnaryOp {
  kNeg, kAbs, kRelu, kSign, kExp, kLog, kSqrt, kRsqrt, kSigmoid, kTanh,
  kGelu, kGeluTanh, kGeluDerivative, kGeluTanhDerivative
};
enum class ReduceKind { kSum, kMax, kMin, kArgMax, kArgMin };

const char* binary_op_name(BinaryOp op);
const char* unary_op_name(UnaryOp op);

// What every device's binary kernel rejects before computing (PyTorch's messages): bool - bool,
// and a fractional alpha with integer operands.
void check_binary_operands(BinaryOp op, ScalarType dtype, const Scalar& alpha);

// Batch-norm data viewed as contiguous [N, C, inner].
struct BatchNormShape {
  int64_t N, C, inner;
};
// grad_input = a[c] * grad_out - b[c] - d[c] * (input - mean[c]) (training); with b == nullptr,
// grad_input = a[c] * grad_out (eval: statistics are constants). Arrays of C doubles on the
// device of the tensors.
// Batch norm followed by ReLU in one pass (batch_norm_relu, Note [Batch norm + ReLU] in
// tensor/batch_norm.cc): the forward's scale[c] and shift[c] (C doubles on the device of the
// tensors), from which the backward recomputes each output y = input * scale + shift as
// batch_norm_transform computed it, and zeroes grad_out where y <= 0 (ReLU's threshold_backward).
// Null scale: no ReLU.
struct BatchNormRelu {
  const double* scale = nullptr;
  const double* shift = nullptr;
};
struct BatchNormBackwardCoefficients {
  const double* a = nullptr;
  const double* b = nullptr;
  const double* d = nullptr;
  const double* mean = nullptr;
  BatchNormRelu relu;  // grad_out is masked first when set
};

// Every slot of the per-device kernel table, written once as _(name, parameters): it generates
// KernelTable's members, the slot names that errors and the coverage test (tests/tensor/
// kernel_coverage_test.cc) print, and kernel_slot_filled(). A slot's contract is the comment above it.
#define EMBER_FORALL_KERNEL_SLOTS(_)                                                             \
  /* out = a (op) b. a and b share a dtype and are broadcast (expanded) to out's shape; out has */ \
  /* that dtype too, except for comparisons, where it is bool. alpha scales b for Add and Sub */  \
  /* and is the threshold of ThresholdBackward. */                                               \
  _(binary, (BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,                   \
             const Scalar& alpha))                                                               \
  /* out = op(in); same dtype and shape. */                                                      \
  _(unary, (UnaryOp op, const Tensor& out, const Tensor& in))                                    \
  _(clamp, (const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,                \
            const std::optional<Scalar>& hi))                                                    \
  /* out = cond ? a : b, all expanded to out's shape; a, b and out share a dtype. */             \
  _(where, (const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b))            \
  /* dst = src converted to dst's dtype; both on this device, src expanded to dst's shape and */  \
  /* not overlapping it. */                                                                      \
  _(copy, (const Tensor& dst, const Tensor& src))                                                \
  /* Every element of t (any layout) = value converted to t's dtype. */                           \
  _(fill, (const Tensor& t, const Scalar& value))                                                \
  /* Fills a dense `out` with draws of `spec` from `gen`, element by element in order. Devices */ \
  /* may draw differently (the CPU reads gen's stream, CUDA keys Philox with one draw of it): */ \
  /* a seed gives the same tensor on every run and rank, not across devices. */               \
  _(random, (const Tensor& out, const RandomSpec& spec, Generator& gen))                         \
  /* The indexing slots take int64 indices the op has checked to lie in [-size, size) (negative */ \
  /* ones count from the end), contiguous. out = in's slices index[i] along dim; out is fresh */  \
  /* and contiguous, index 1-d. */                                                               \
  _(index_select, (const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index))       \
  /* self's slices index[i] along dim += src's slice i (src has self's shape but index.numel() */ \
  /* along dim); repeated indices accumulate. */                                                 \
  _(index_add, (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src))        \
  /* out[p] = in[p with its dim coordinate replaced by index[p]]; index has out's shape, which */ \
  /* is no larger than in's outside dim. */                                                      \
  _(gather, (const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index))             \
  /* self[p with dim coordinate index[p]] += src[p] for p over index's shape (the adjoint of */   \
  /* gather); repeated targets accumulate. */                                                    \
  _(scatter_add, (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src))      \
  /* Reduces `in` over `reduce_mask` dims into out (out has in's rank, size 1 on reduced dims). */ \
  /* Sum accumulates in acc_t and writes out's dtype; Max/Min keep the dtype; Arg* write int64. */ \
  _(reduce, (ReduceKind op, const Tensor& out, const Tensor& in,                                   \
             const std::vector<bool>& reduce_mask))                                              \
  /* out[b] = beta * out[b] + alpha * a[b] @ b[b] for 3-d [batch, n, k] x [batch, k, m] inputs */ \
  /* of one floating dtype; out is contiguous [batch, n, m]. beta == 0 ignores out's contents. */  \
  _(batched_gemm, (const Tensor& out, const Tensor& a, const Tensor& b, double beta,             \
                   double alpha))                                                                \
  /* out [N, O, Ho, Wo] = conv2d(input, weight) + bias for contiguous float32/float64 operands */  \
  /* of geometry g (checked by the op); bias may be undefined. */                                \
  _(conv2d, (const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,   \
             const cpu::ConvGeometry& g, int64_t groups))                                        \
  /* The gradients of conv2d; an undefined grad_* is not computed. */                           \
  _(conv2d_backward, (const Tensor& grad_out, const Tensor& input, const Tensor& weight,         \
                      const cpu::ConvGeometry& g, int64_t groups, const Tensor& grad_input,      \
                      const Tensor& grad_weight, const Tensor& grad_bias))                       \
  /* Batch norm over contiguous float32/float64 [N, C, inner] tensors; per-channel arrays are */  \
  /* C doubles in the input's device memory (Note [Per-channel batch-norm values stay on the */   \
  /* device], tensor/batch_norm.cc). mean[c] and biased var[c] of input: */                     \
  _(batch_norm_stats, (const Tensor& input, const BatchNormShape& s, double* mean, double* var)) \
  /* out = input * scale[c] + shift[c], plus residual where defined (input's shape and dtype, */  \
  /* contiguous), then ReLU's x < 0 ? 0 : x where relu is set: */                                \
  _(batch_norm_transform, (const Tensor& out, const Tensor& input, const BatchNormShape& s,       \
                           const double* scale, const double* shift, const Tensor& residual,     \
                           bool relu))                                                           \
  /* sum_g[c] = sum of grad_out, sum_gx[c] = sum of grad_out * (input - mean[c]), grad_out */     \
  /* masked by relu first where it is set (BatchNormRelu): */                                    \
  _(batch_norm_backward_reduce, (const Tensor& grad_out, const Tensor& input,                    \
                                 const BatchNormShape& s, const double* mean,                    \
                                 const BatchNormRelu& relu, double* sum_g, double* sum_gx))      \
  /* grad_input from BatchNormBackwardCoefficients: */                                         \
  _(batch_norm_backward_transform, (const Tensor& grad_input, const Tensor& grad_out,            \
                                    const Tensor& input, const BatchNormShape& s,                \
                                    const BatchNormBackwardCoefficients& k))                 \
  /* Pooling over dense float32/float64 planes of geometry g (tensor/pooling.cc checks it). */    \
  /* max: out = the window's maximum (NaN wins, then the first maximum), indices = its flat */    \
  /* position h * W + w in the plane (int64). */                                                 \
  _(max_pool2d, (const Tensor& out, const Tensor& indices, const Tensor& input,                 \
                 const PoolGeometry& g))                                                         \
  _(avg_pool2d, (const Tensor& out, const Tensor& input, const PoolGeometry& g))                 \
  /* grad_input (dense, every element written) of avg_pool2d for a dense grad_out. */           \
  _(avg_pool2d_backward, (const Tensor& grad_input, const Tensor& grad_out,                      \
                          const PoolGeometry& g))                                                \
  /* PyTorch's adaptive windows [floor(o * in / out), ceil((o + 1) * in / out)). */             \
  _(adaptive_avg_pool2d, (const Tensor& out, const Tensor& input, const PoolGeometry& g))        \
  _(adaptive_avg_pool2d_backward, (const Tensor& grad_input, const Tensor& grad_out,             \
                                   const PoolGeometry& g))                                       \
  /* One SGD step over every parameter of the list (checked by fused_sgd_): each element */      \
  /* rounds to the dtype after each of the op-by-op update's steps, so the bits are those of */   \
  /* SGD's tensor ops (Note [Fused SGD], tensor/fused_sgd.cc). */                                 \
  _(fused_sgd, (const std::vector<SgdParameter>& params, const SgdHyperparameters& h))

// One 2-d pooling over `planes` = N * C planes of H x W (dense): window kh x kw, stride, padding
// (count_include_pad averaging), output Ho x Wo. Adaptive pooling uses planes, H, W, Ho, Wo only.
struct PoolGeometry {
  int64_t planes, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo;
};

// What the random slot draws: uniform in [0, 1) with `bits` random bits (never rounding up to 1
// in the target dtype), standard normal, or integers low + [0, range).
struct RandomSpec {
  enum class Kind { kUniform, kNormal, kInteger } kind = Kind::kUniform;
  int bits = 53;
  int64_t low = 0;
  uint64_t range = 1;
};

struct KernelTable {
#define EMBER_DECLARE_KERNEL_SLOT(name, params) void(*name) params = nullptr;
  EMBER_FORALL_KERNEL_SLOTS(EMBER_DECLARE_KERNEL_SLOT)
#undef EMBER_DECLARE_KERNEL_SLOT
};

// The slots' names in declaration order, and whether a table fills each.
const std::vector<const char*>& kernel_slot_names();
std::vector<bool> kernel_slots_filled(const KernelTable& table);

KernelTable& kernel_table(DeviceType type);
// Checks every tensor is on the same device and returns that device's table.
const KernelTable& kernels_for(const char* op, std::initializer_list<const Tensor*> tensors);

[[noreturn]] void throw_no_kernel(const char* op, std::initializer_list<const Tensor*> tensors);

// The `slot` kernel of the tensors' device, e.g. kernel_for(&KernelTable::conv2d, "conv2d", {&in,
// &w})(...); throws "no CUDA kernel for conv2d (<operands>)" when that device has none.
template <typename Fn>
Fn kernel_for(Fn KernelTable::*slot, const char* op, std::initializer_list<const Tensor*> tensors) {
  const Fn fn = kernels_for(op, tensors).*slot;
  if (fn == nullptr) throw_no_kernel(op, tensors);
  return fn;
}

namespace cpu {
// The CPU table, filled from the kernels of cpu_capability_level() (tensor/cpu/capability.h).
KernelTable make_kernel_table();
}

}  // namespace ember
