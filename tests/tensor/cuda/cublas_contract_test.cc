// cuBLAS's GEMM contract as ember relies on it: column-major operands, transposes, leading
// dimensions larger than the row count, strided batches, beta == 0 not reading C, and the argument
// checks. Runs against the simulator's reference (--config=cudasim) and, unchanged, against real
// cuBLAS on a GPU, so the reference is held to the library's behaviour.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/tensor/cuda/device_buffer.h"

namespace ember::cuda::testing {
namespace {

// A column-major matrix with leading dimension ld >= rows, filled with small exact values.
struct Matrix {
  int rows, cols, ld;
  std::vector<double> data;
  Matrix(int r, int c, int ld_, int seed) : rows(r), cols(c), ld(ld_), data(size_t(ld_) * c) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = double((i * 7 + seed * 13) % 11) - 5;
  }
  double at(int i, int j) const { return data[i + size_t(j) * ld]; }
};

class CublasContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EMBER_SKIP_WITHOUT_CUDA_DEVICE();
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle_) cublasDestroy(handle_);
  }
  cublasHandle_t handle_ = nullptr;
};

TEST_F(CublasContractTest, DgemmHonoursTransposesAndLeadingDimensions) {
  const int m = 5, n = 4, k = 3;
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      const bool at = ta == CUBLAS_OP_T, bt = tb == CUBLAS_OP_T;
      Matrix A(at ? k : m, at ? m : k, (at ? k : m) + 2, 1);
      Matrix B(bt ? n : k, bt ? k : n, (bt ? n : k) + 1, 2);
      Matrix C(m, n, m + 3, 3);
      DeviceBuffer<double> dA(A.data), dB(B.data), dC(C.data);
      const double alpha = 2.0, beta = -1.0;
      ASSERT_EQ(cublasDgemm(handle_, ta, tb, m, n, k, &alpha, dA.get(), A.ld, dB.get(), B.ld, &beta,
                            dC.get(), C.ld),
                CUBLAS_STATUS_SUCCESS);
      const std::vector<double> out = dC.download();
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
          double sum = 0;
          for (int l = 0; l < k; ++l)
            sum += (at ? A.at(l, i) : A.at(i, l)) * (bt ? B.at(j, l) : B.at(l, j));
          EXPECT_EQ(out[i + size_t(j) * C.ld], alpha * sum + beta * C.at(i, j))
              << "transa=" << at << " transb=" << bt << " at (" << i << "," << j << ")";
        }
        // Rows between m and ldc are not part of C and stay untouched.
        for (int i = m; i < C.ld; ++i)
          EXPECT_EQ(out[i + size_t(j) * C.ld], C.data[i + size_t(j) * C.ld]);
      }
    }
  }
}

TEST_F(CublasContractTest, SgemmStridedBatchedComputesEachBatch) {
  const int m = 3, n = 2, k = 4, batch = 3;
  const long long sa = m * k + 1, sb = k * n + 2, sc = m * n + 3;
  std::vector<float> A(sa * batch), B(sb * batch), C(sc * batch, 0.0f);
  for (size_t i = 0; i < A.size(); ++i) A[i] = float(i % 5) - 2;
  for (size_t i = 0; i < B.size(); ++i) B[i] = float(i % 3) - 1;
  DeviceBuffer<float> dA(A), dB(B), dC(C);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, dA.get(),
                                      m, sa, dB.get(), k, sb, &beta, dC.get(), m, sc, batch),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> out = dC.download();
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        float sum = 0;
        for (int l = 0; l < k; ++l) sum += A[b * sa + i + l * m] * B[b * sb + l + j * k];
        EXPECT_EQ(out[b * sc + i + j * m], sum) << "batch " << b;
      }
    }
  }
}

TEST_F(CublasContractTest, BetaZeroDoesNotReadC) {
  DeviceBuffer<float> dA(std::vector<float>{1, 2}), dB(std::vector<float>{3}),
      dC(std::vector<float>(2, std::numeric_limits<float>::quiet_NaN()));
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 1, &alpha, dA.get(), 2, dB.get(),
                        1, &beta, dC.get(), 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dC.download(), (std::vector<float>{3, 6}));
}

TEST_F(CublasContractTest, RejectsLeadingDimensionsSmallerThanTheRows) {
  DeviceBuffer<float> d(64);
  const float one = 1.0f;
  // A is 4 x 2 stored; lda 3 < 4.
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 2, &one, d.get(), 3, d.get(), 2,
                        &one, d.get(), 4),
            CUBLAS_STATUS_INVALID_VALUE);
  // Transposed A is stored k x m = 2 x 4: lda 2 is enough there, ldc 3 < m is not.
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 4, 2, 2, &one, d.get(), 2, d.get(), 2,
                        &one, d.get(), 3),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, &one, d.get(), 1, d.get(), 2,
                        &one, d.get(), 1),
            CUBLAS_STATUS_INVALID_VALUE);
}

#ifdef EMBER_CUDA_SIMULATOR
// On a device these fault or read garbage; the reference must refuse them.
TEST_F(CublasContractTest, OperandsMustBeDeviceMemoryOfTheImpliedExtent) {
  DeviceBuffer<float> small(4), c(16);
  const float one = 1.0f, zero = 0.0f;
  // A of 4 x 4 needs 16 floats; the allocation has 4.
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, small.get(), 4, c.get(),
                        4, &zero, c.get(), 4),
            CUBLAS_STATUS_EXECUTION_FAILED);
  std::vector<float> host(16, 1.0f);
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, host.data(), 4, c.get(),
                        4, &zero, c.get(), 4),
            CUBLAS_STATUS_EXECUTION_FAILED);
  cudaGetLastError();
}
#endif

}  // namespace
}  // namespace ember::cuda::testing
