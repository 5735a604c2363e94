// Host-callable launchers for the CUDA kernels in tensor/cuda/*.cu. Plain pointers, sizes and the
// POD structs below only, so nvcc never sees ember's tensor headers; the checks and the
// kernel-table glue live in cuda_kernels.cc. Each launcher queues its kernels on `stream` and
// returns the launch's cudaError_t as an int (0 on success).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember::cuda {

// ember's ScalarType, in its order (cuda_kernels.cc static_asserts that they agree).
enum class DType : int { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool };
// BinaryOp and UnaryOp of tensor/kernels.h, in their order.
enum class BinaryKind : int {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum, kThresholdBackward, kEq, kNe, kLt, kLe, kGt, kGe
};
enum class UnaryKind : int {
  kNeg, kAbs, kRelu, kSign, kExp, kLog, kSqrt, kRsqrt, kSigmoid, kTanh,
  kGelu, kGeluTanh, kGeluDerivative, kGeluTanhDerivative
};

// A host Scalar in the three forms a kernel may compute with.
struct ScalarArg {
  double f = 0;
  int64_t i = 0;
  bool b = false;
};

// The iteration space of an elementwise kernel and where each operand's elements are: operand k's
// element at multi-index (c_0 .. c_{ndim-1}) is at offset sum_d c_d * strides[k][d] (elements).
// Operand 0 is the output. cuda_kernels.cc merges dims that are contiguous in every operand.
constexpr int kMaxDims = 12;
constexpr int kMaxOperands = 4;
struct Indexer {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];
};

// out = a (op) b, over ix (operands out, a, b); out is bool for comparisons, else a's dtype.
int launch_binary(BinaryKind op, DType dtype, void* out, const void* a, const void* b,
                  const Indexer& ix, int64_t n, ScalarArg alpha, cudaStream_t stream);
// out = op(in) over ix (operands out, in).
int launch_unary(UnaryKind op, DType dtype, void* out, const void* in, const Indexer& ix,
                 int64_t n, cudaStream_t stream);
int launch_clamp(DType dtype, void* out, const void* in, const Indexer& ix, int64_t n,
                 bool has_lo, ScalarArg lo, bool has_hi, ScalarArg hi, cudaStream_t stream);
// out = cond ? a : b over ix (operands out, cond, a, b).
int launch_where(DType dtype, void* out, const bool* cond, const void* a, const void* b,
                 const Indexer& ix, int64_t n, cudaStream_t stream);
// out = in converted to out_dtype, over ix (operands out, in).
int launch_copy(DType out_dtype, DType in_dtype, void* out, const void* in, const Indexer& ix,
                int64_t n, cudaStream_t stream);
// out = value over ix (operand out).
int launch_fill(DType dtype, void* out, const Indexer& ix, int64_t n, ScalarArg value,
                cudaStream_t stream);

// Reductions of `in` viewed as [rows, cols]: row r, column c is at offset kept(r) + reduced(c)
// (one-operand Indexers). Sum writes rows values of the accumulation type (double for floating
// dtypes, int64 otherwise) to `out`; the extremes write rows values of dtype (when `values` is
// not null) and the column index of each (when `indices` is not null).
int launch_sum(DType dtype, void* out, const void* in, const Indexer& kept,
               const Indexer& reduced, int64_t rows, int64_t cols, cudaStream_t stream);
int launch_extreme(DType dtype, bool is_max, void* values, int64_t* indices, const void* in,
                   const Indexer& kept, const Indexer& reduced, int64_t rows, int64_t cols,
                   cudaStream_t stream);

// out[batch][i][j] = beta * out + alpha * sum_l a[batch][i][l] * b[batch][l][j]; out dense
// [batch, n, m], a and b at element strides {batch, row, column}.
struct GemmShape {
  int64_t batch, n, k, m;
  int64_t a_strides[3];
  int64_t b_strides[3];
};
int launch_integer_gemm(DType dtype, void* out, const void* a, const void* b, const GemmShape& g,
                        double beta, double alpha, cudaStream_t stream);

// A dense tensor seen as [outer, size, inner] around the indexed dim, with n indices.
struct SliceShape {
  int64_t outer, size, inner, n;
};
// out [outer, n, inner] = in [outer, size, inner] at rows index[i] (all dense).
int launch_index_select(DType dtype, void* out, const void* in, const int64_t* index,
                        const SliceShape& s, cudaStream_t stream);
// self [outer, size, inner] at rows index[i] += src [outer, n, inner] (dense; float32, float64,
// int32 and int64 only: atomicAdd's types).
int launch_index_add(DType dtype, void* self, const void* src, const int64_t* index,
                     const SliceShape& s, cudaStream_t stream);
// Over the `total` positions of an index tensor of g.sizes (unmerged, row-major, index dense):
// gather reads in (strides g.strides[0], dim coordinate from index) into out (g.strides[1]);
// scatter_add adds src (g.strides[1]) into self (g.strides[0], dim coordinate from index).
int launch_gather(DType dtype, void* out, const void* in, const int64_t* index, const Indexer& g,
                  int dim, int64_t dim_size, int64_t total, cudaStream_t stream);
int launch_scatter_add(DType dtype, void* self, const void* src, const int64_t* index,
                       const Indexer& g, int dim, int64_t dim_size, int64_t total,
                       cudaStream_t stream);

// One 2-d convolution's geometry (tensor/cpu/conv_geometry.h's fields; C is the input's channels).
struct ConvShape {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};
// cols [N, C * kh * kw, Ho * Wo] from a dense NCHW input (float32 or float64), and back: col2im
// writes every input element (the sum of the column entries that read it).
int launch_im2col(DType dtype, void* cols, const void* in, const ConvShape& g,
                  cudaStream_t stream);
int launch_col2im(DType dtype, void* in, const void* cols, const ConvShape& g,
                  cudaStream_t stream);

// Batch norm over dense [N, C, inner] float32/float64 data; per-channel arrays are C device
// doubles. stats: mean and biased variance; transform: out = x * scale[c] + shift[c];
// backward_reduce: sum_g = sum of g, sum_gx = sum of g * (x - mean[c]); backward_transform:
// gi = a[c] * g - b[c] - d[c] * (x - mean[c]), or a[c] * g when b is null. stats and
// backward_reduce sum each channel in parts (Note [Batch-norm sums in parts],
// batch_norm_kernels.cu) through a device workspace of batch_norm_workspace_doubles(s) doubles.
struct BatchNormDims {
  int64_t N, C, inner;
};
int64_t batch_norm_workspace_doubles(const BatchNormDims& s);
int launch_batch_norm_stats(DType dtype, const void* x, const BatchNormDims& s, double* workspace,
                            double* mean, double* var, cudaStream_t stream);
// residual, relu, relu_scale and relu_shift: batch_norm_relu (BatchNormRelu, tensor/kernels.h);
// null residual: none; null relu_scale: plain batch norm.
int launch_batch_norm_transform(DType dtype, void* out, const void* x, const BatchNormDims& s,
                                const double* scale, const double* shift, const void* residual,
                                bool relu, cudaStream_t stream);
int launch_batch_norm_backward_reduce(DType dtype, const void* g, const void* x,
                                      const BatchNormDims& s, const double* mean,
                                      const double* relu_scale, const double* relu_shift,
                                      double* workspace, double* sum_g, double* sum_gx,
                                      cudaStream_t stream);
int launch_batch_norm_backward_transform(DType dtype, void* gi, const void* g, const void* x,
                                         const BatchNormDims& s, const double* a, const double* b,
                                         const double* d, const double* mean,
                                         const double* relu_scale, const double* relu_shift,
                                         cudaStream_t stream);

// out[i] (dense, n elements) = a draw from Philox4x32-10 at counter i under `key`: uniform in
// [0, 1) with `bits` bits, standard normal (Box-Muller), or low + (64 bits mod range).
struct RandomDraw {
  enum Kind : int { kUniform, kNormal, kInteger } kind;
  int bits;
  int64_t low;
  uint64_t range;
};
int launch_random(DType dtype, void* out, int64_t n, uint64_t key, const RandomDraw& draw,
                  cudaStream_t stream);

// 2-d pooling over `planes` dense H x W planes (tensor/kernels.h's PoolGeometry). Forward kinds
// write out (planes x Ho x Wo; Max also the flat input index of each maximum); backward kinds
// write every element of `out` = grad_input (planes x H x W) from `in` = grad_out.
struct PoolShape {
  int64_t planes, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo;
};
enum class PoolKind : int { kMax, kAvg, kAvgBackward, kAdaptiveAvg, kAdaptiveAvgBackward };
int launch_pool(PoolKind kind, DType dtype, void* out, int64_t* indices, const void* in,
                const PoolShape& g, cudaStream_t stream);

// One SGD step on one dense parameter of n elements (fused_sgd_, tensor/fused_sgd.h): buf is null
// when momentum is 0; first_step sets it to the decayed gradient.
struct SgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
};
int launch_fused_sgd(DType dtype, void* param, const void* grad, void* buf, int64_t n,
                     const SgdArgs& args, cudaStream_t stream);

}  // namespace ember::cuda
