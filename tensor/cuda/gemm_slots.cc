// The CUDA table's batched_gemm slot: float32/float64 through cuBLAS's strided-batched GEMM,
// float16/bfloat16 through it in float32 (rounded once at the end, as on the CPU), integers through
// gemm_kernels.cu. TF32 stays off unless cuda_set_allow_tf32(true) (tensor/device_backend.h).
#include <cublas_v2.h>

#include <vector>

#include "tensor/cuda/slot_glue.h"
#include "tensor/device_backend.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::cuda {
namespace {

#define CUBLAS_CHECK(call, ...)                                                            \
  do {                                                                                     \
    const cublasStatus_t ember_cublas_status_ = (call);                                    \
    EMBER_CHECK(ember_cublas_status_ == CUBLAS_STATUS_SUCCESS, #call, " failed: status ",  \
                static_cast<int>(ember_cublas_status_), ##__VA_ARGS__);                    \
  } while (0)

// One cuBLAS handle per device and host thread (a handle must not be used by two threads at
// once); created on first use, destroyed when the thread ends.
cublasHandle_t handle_for(int device) {
  struct Handles {
    std::vector<cublasHandle_t> by_device;
    ~Handles() {
      for (cublasHandle_t h : by_device) {
        if (h) cublasDestroy(h);
      }
    }
  };
  static thread_local Handles handles;
  if (static_cast<int>(handles.by_device.size()) <= device) handles.by_device.resize(device + 1);
  cublasHandle_t& h = handles.by_device[device];
  if (h == nullptr) CUBLAS_CHECK(cublasCreate(&h), " on cuda:", device);
  return h;
}

// A row-major [rows, cols] operand (batch dim 0) as cuBLAS's column-major contract wants it:
// row-major with unit column stride is a column-major transpose (op N on the swapped product);
// unit row stride is column-major as is (op T); anything else is made contiguous first.
struct ColumnMajorOperand {
  Tensor t;
  bool transposed;  // cuBLAS op for the swapped product C^T = B^T A^T
  int64_t ld;
};

ColumnMajorOperand as_operand(const Tensor& m) {
  const int64_t rows = m.size(1), cols = m.size(2);
  if (m.stride(2) == 1 && m.stride(1) >= std::max<int64_t>(cols, 1)) {
    return {m, false, std::max<int64_t>(m.stride(1), 1)};
  }
  if (m.stride(1) == 1 && m.stride(2) >= std::max<int64_t>(rows, 1)) {
    return {m, true, std::max<int64_t>(m.stride(2), 1)};
  }
  Tensor c = m.contiguous();
  return {c, false, std::max<int64_t>(cols, 1)};
}

void float_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double beta, double alpha) {
  const int64_t batch = out.size(0), n = out.size(1), m = out.size(2), k = a.size(2);
  const ColumnMajorOperand A = as_operand(a), B = as_operand(b);
  cublasHandle_t h = handle_for(out.device().index);
  CUBLAS_CHECK(cublasSetStream(h, stream_of(out)));
  CUBLAS_CHECK(cublasSetMathMode(h, cuda_allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH
                                                      : CUBLAS_DEFAULT_MATH));
  // Row-major out = a @ b is column-major out^T = b^T a^T: an m x n product over k.
  const cublasOperation_t op_b = B.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = A.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldc = static_cast<int>(std::max<int64_t>(m, 1));
  const long long stride_a = A.t.stride(0), stride_b = B.t.stride(0), stride_c = n * m;
  if (out.dtype() == kFloat64) {
    const double al = alpha, be = beta;
    CUBLAS_CHECK(cublasDgemmStridedBatched(
                     h, op_b, op_a, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                     &al, static_cast<const double*>(B.t.data_ptr()), static_cast<int>(B.ld),
                     stride_b, static_cast<const double*>(A.t.data_ptr()), static_cast<int>(A.ld),
                     stride_a, &be, static_cast<double*>(out.data_ptr()), ldc, stride_c,
                     static_cast<int>(batch)),
                 " for matmul of ", a.describe(), " and ", b.describe());
  } else {
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    CUBLAS_CHECK(cublasSgemmStridedBatched(
                     h, op_b, op_a, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                     &al, static_cast<const float*>(B.t.data_ptr()), static_cast<int>(B.ld),
                     stride_b, static_cast<const float*>(A.t.data_ptr()), static_cast<int>(A.ld),
                     stride_a, &be, static_cast<float*>(out.data_ptr()), ldc, stride_c,
                     static_cast<int>(batch)),
                 " for matmul of ", a.describe(), " and ", b.describe());
  }
}

void batched_gemm_cuda(const Tensor& out, const Tensor& a, const Tensor& b, double beta,
                       double alpha) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device().index);
  switch (a.dtype()) {
    case kFloat32:
    case kFloat64: return float_gemm(out, a, b, beta, alpha);
    case kFloat16:
    case kBFloat16: {
      // With beta 0, out is not read (it may be uninitialised, as cuBLAS allows).
      Tensor of = beta == 0 ? empty(out.sizes(), TensorOptions(kFloat32, out.device()))
                            : out.to(kFloat32);
      float_gemm(of, a.to(kFloat32), b.to(kFloat32), beta, alpha);
      copy_(out, of);
      return;
    }
    case kInt32:
    case kInt64: {
      GemmShape g{out.size(0), out.size(1), a.size(2), out.size(2), {}, {}};
      for (int d = 0; d < 3; ++d) {
        g.a_strides[d] = a.stride(d);
        g.b_strides[d] = b.stride(d);
      }
      check_launch(launch_integer_gemm(dtype_of(a), out.data_ptr(), a.data_ptr(), b.data_ptr(), g,
                                       beta, alpha, stream_of(out)),
                   "matmul", out);
      return;
    }
    default: break;
  }
  EMBER_THROW("matmul: not supported for dtype ", a.dtype(), " (", a.describe(), ")");
}

const bool kRegistered = [] {
  kernel_table(DeviceType::kCUDA).batched_gemm = batched_gemm_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
