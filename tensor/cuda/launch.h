// Host-callable launchers for the CUDA kernels in tensor/cuda/*.cu. Plain pointers, sizes and the
// POD structs below only, so nvcc never sees ember's tensor headers; the checks and the
// kernel-table glue live in cuda_kernels.cc. Each launcher queues its kernels on `stream` and
// returns the launch's cudaError_t as an int (0 on success).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember::cuda {

// ember's ScalarType, in its order (cuda_kernels.cc static_asserts that they agree).
enum class DType : int { Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8, Bool };
// BinaryOp and UnaryOp of tensor/kernels.h, in their order.
enum class BinaryKind : int { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };
enum class UnaryKind : int { Neg, Abs, Relu, Sign, Exp, Log, Sqrt, Rsqrt, Sigmoid, Tanh };

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

}  // namespace ember::cuda
