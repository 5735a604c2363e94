// The CUDA simulator's cuBLAS: a plain reference GEMM (double accumulation) behind cuBLAS's
// argument checks, so a call with a wrong transpose, leading dimension, stride or pointer fails
// here as it would on the device, instead of computing something plausible.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "sim/cuda/checks.h"
#include "sim/cuda/state.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

cublasStatus_t reject(cublasStatus_t status, const std::string& detail) {
  std::fprintf(stderr, "cudasim: cuBLAS %s: %s\n", cublasGetStatusName(status), detail.c_str());
  return status;
}

struct GemmArgs {
  const char* name;
  cublasHandle_t handle;
  cublasOperation_t transa, transb;
  int m, n, k;
  int lda, ldb, ldc;
  long long stride_a, stride_b, stride_c;
  int batch;
};

// Bytes from the first to one past the last element a column-major operand of `rows` x `cols`
// (stored), leading dimension ld, over `batch` matrices `stride` apart, can touch.
size_t extent_bytes(int rows, int cols, int ld, long long stride, int batch, size_t elem) {
  if (rows == 0 || cols == 0 || batch == 0) return 0;
  const long long last = (rows - 1) + static_cast<long long>(cols - 1) * ld +
                         static_cast<long long>(batch - 1) * stride;
  return static_cast<size_t>(last + 1) * elem;
}

template <typename T>
cublasStatus_t gemm(const GemmArgs& g, const T* alpha, const T* A, const T* B, const T* beta,
                    T* C) {
  const std::string name = g.name;
  if (g.handle == nullptr) return reject(CUBLAS_STATUS_NOT_INITIALIZED, name + ": null handle");
  auto valid_op = [](cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
  };
  if (!valid_op(g.transa) || !valid_op(g.transb)) {
    return reject(CUBLAS_STATUS_INVALID_VALUE, name + ": transa/transb is not N, T or C");
  }
  const bool ta = g.transa != CUBLAS_OP_N, tb = g.transb != CUBLAS_OP_N;
  // Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k).
  const int a_rows = ta ? g.k : g.m, a_cols = ta ? g.m : g.k;
  const int b_rows = tb ? g.n : g.k, b_cols = tb ? g.k : g.n;
  const std::string dims = " (m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                           " k=" + std::to_string(g.k) + " lda=" + std::to_string(g.lda) +
                           " ldb=" + std::to_string(g.ldb) + " ldc=" + std::to_string(g.ldc) +
                           " transa=" + (ta ? "T" : "N") + " transb=" + (tb ? "T" : "N") + ")";
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) {
    return reject(CUBLAS_STATUS_INVALID_VALUE, name + ": negative size" + dims);
  }
  if (g.lda < std::max(1, a_rows) || g.ldb < std::max(1, b_rows) || g.ldc < std::max(1, g.m)) {
    return reject(CUBLAS_STATUS_INVALID_VALUE,
                  name + ": a leading dimension is smaller than its operand's row count" + dims);
  }
  if (alpha == nullptr || beta == nullptr) {
    return reject(CUBLAS_STATUS_INVALID_VALUE, name + ": null alpha or beta");
  }
  if (ember::cudasim::is_device_range(alpha, sizeof(T)) ||
      ember::cudasim::is_device_range(beta, sizeof(T))) {
    return reject(CUBLAS_STATUS_INVALID_VALUE,
                  name + ": alpha/beta point to device memory, but the pointer mode is host");
  }
  if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;
  const bool reads_ab = g.k > 0 && *alpha != T(0);
  struct Operand {
    const char* what;
    const void* ptr;
    size_t bytes;
  } operands[] = {
      {"A", A, reads_ab ? extent_bytes(a_rows, a_cols, g.lda, g.stride_a, g.batch, sizeof(T)) : 0},
      {"B", B, reads_ab ? extent_bytes(b_rows, b_cols, g.ldb, g.stride_b, g.batch, sizeof(T)) : 0},
      {"C", C, extent_bytes(g.m, g.n, g.ldc, g.stride_c, g.batch, sizeof(T))},
  };
  for (const Operand& op : operands) {
    if (op.bytes != 0 && !ember::cudasim::is_device_range(op.ptr, op.bytes)) {
      ember::cudasim::fail(cudaErrorIllegalAddress,
                           name + ": operand " + op.what + " needs " + std::to_string(op.bytes) +
                               " bytes of device memory from its pointer, which it does not have" +
                               dims);
      return reject(CUBLAS_STATUS_EXECUTION_FAILED, name + ": illegal address in " + op.what);
    }
  }
  // The product runs when the handle's stream reaches it; alpha and beta are read now (host
  // pointer mode), as cuBLAS does.
  const T alpha_value = *alpha, beta_value = *beta;
  ember::cudasim::enqueue(g.handle->stream, [g, alpha_value, beta_value, A, B, C, ta, tb, reads_ab,
                                               a_rows, a_cols, b_rows, b_cols, name, dims] {
    ember::cudasim::DeviceAccess access;
    // initcheck: every element the product reads was written (column by column: the gaps a
    // leading dimension leaves are not read).
    auto unwritten = [&](const T* m, int rows, int cols, int ld, long long stride) -> std::string {
      for (int b = 0; b < g.batch; ++b) {
        for (int j = 0; j < cols; ++j) {
          const std::string bad = ember::cudasim::shadow_unwritten(
              m + b * stride + static_cast<long long>(j) * ld, sizeof(T) * static_cast<size_t>(rows));
          if (!bad.empty()) return bad;
        }
      }
      return "";
    };
    for (const auto& [what, bad] : {
             std::pair<const char*, std::string>{"A", reads_ab ? unwritten(A, a_rows, a_cols, g.lda, g.stride_a) : ""},
             {"B", reads_ab ? unwritten(B, b_rows, b_cols, g.ldb, g.stride_b) : ""},
             {"C", beta_value != T(0) ? unwritten(C, g.m, g.n, g.ldc, g.stride_c) : ""}}) {
      if (!bad.empty()) return name + ": operand " + what + ": " + bad + dims;
    }
    for (int b = 0; b < g.batch; ++b) {
      const T* a = A + b * g.stride_a;
      const T* bm = B + b * g.stride_b;
      T* c = C + b * g.stride_c;
      for (int j = 0; j < g.n; ++j) {
        for (int i = 0; i < g.m; ++i) {
          double sum = 0;
          if (reads_ab) {
            for (int l = 0; l < g.k; ++l) {
              const double av = ta ? a[l + static_cast<long long>(i) * g.lda]
                                   : a[i + static_cast<long long>(l) * g.lda];
              const double bv = tb ? bm[j + static_cast<long long>(l) * g.ldb]
                                   : bm[l + static_cast<long long>(j) * g.ldb];
              sum += av * bv;
            }
          }
          T& out = c[i + static_cast<long long>(j) * g.ldc];
          const double scaled = static_cast<double>(alpha_value) * sum;
          out = static_cast<T>(beta_value == T(0) ? scaled : scaled + static_cast<double>(beta_value) * out);
        }
        ember::cudasim::shadow_on_write(c + static_cast<long long>(j) * g.ldc,
                                        sizeof(T) * static_cast<size_t>(g.m));
      }
    }
    return std::string();
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return cublasGetStatusName(status);
  }
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: null handle");
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: null handle");
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr)
    return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: null handle");
  if (!ember::cudasim::is_live_stream(stream)) {
    return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream: stream is not live");
  }
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr)
    return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream: null handle");
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr)
    return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: null handle");
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr)
    return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode: null handle");
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
  return gemm<float>({"cublasSgemm", handle, transa, transb, m, n, k, lda, ldb, ldc, 0, 0, 0, 1},
                     alpha, A, B, beta, C);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double* alpha,
                           const double* A, int lda, const double* B, int ldb, const double* beta,
                           double* C, int ldc) {
  return gemm<double>({"cublasDgemm", handle, transa, transb, m, n, k, lda, ldb, ldc, 0, 0, 0, 1},
                      alpha, A, B, beta, C);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount) {
  return gemm<float>({"cublasSgemmStridedBatched", handle, transa, transb, m, n, k, lda, ldb, ldc,
                      strideA, strideB, strideC, batchCount},
                     alpha, A, B, beta, C);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long strideA, const double* B, int ldb,
                                         long long strideB, const double* beta, double* C, int ldc,
                                         long long strideC, int batchCount) {
  return gemm<double>({"cublasDgemmStridedBatched", handle, transa, transb, m, n, k, lda, ldb, ldc,
                       strideA, strideB, strideC, batchCount},
                      alpha, A, B, beta, C);
}
