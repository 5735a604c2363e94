// Shared pieces of the mpirun suites: a fixture that makes a test fail on rank 0 when it failed on
// any rank (rank 0 alone writes the XML), deterministic per-rank inputs, and dtype-aware comparison.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "distributed/distributed.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/device_backend.h"
#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tests/common/error_matchers.h"

namespace ember::distributed::testing {

class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pg_ = get_default_group();
    rank_ = pg_->rank();
    world_ = pg_->size();
  }
  // Also keeps the ranks in step: no test starts before every rank finished the previous one.
  void TearDown() override {
    const bool failed = HasFailure();
    if (mpi_any_rank(failed) && !failed) ADD_FAILURE() << "this test failed on another rank (see its [rank N] lines)";
  }

  ProcessGroupPtr pg_;
  int rank_ = 0;
  int world_ = 1;
};

// A test on this rank's GPU: its local rank modulo the GPUs it sees (ProcessGroupNCCL's choice;
// ranks may share one over the MPI backend). Skips without a CUDA device.
class MpiCudaTest : public MpiTest {
 protected:
  void SetUp() override {
    MpiTest::SetUp();
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cuda_ = cuda_device_of_local_rank(local_rank());
  }
  Tensor on_device(const Tensor& t) const { return t.to(cuda_); }

  Device cuda_;
};

// Rank r's input: small integers (1..3) so sums and products are exact even in bfloat16.
inline double input_value(int rank, int64_t i) { return static_cast<double>((rank + i) % 3 + 1); }

inline Tensor rank_input(const Shape& shape, ScalarType dtype, int rank) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = input_value(rank, i);
  return from_vector<double>(v, shape).to(dtype);
}

inline double tolerance(ScalarType dtype) {
  switch (dtype) {
    case kFloat16: return 2e-3;
    case kBFloat16: return 2e-2;
    case kFloat32: return 1e-6;
    default: return 1e-12;
  }
}

// Every element of `actual` (any dtype) against `expected` (float64 of the same shape).
inline ::testing::AssertionResult close_to(const Tensor& actual, const Tensor& expected) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.shape_str() << " vs expected "
                                         << expected.shape_str();
  }
  const double tol = tolerance(actual.dtype());
  Tensor a = actual.to(kFloat64).contiguous();
  Tensor e = expected.to(kFloat64).contiguous();
  const double* pa = a.data_ptr<double>();
  const double* pe = e.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::abs(pa[i] - pe[i]) > tol * (1 + std::abs(pe[i]))) {
      return ::testing::AssertionFailure() << dtype_name(actual.dtype()) << " element " << i
                                           << " is " << pa[i] << ", expected " << pe[i];
    }
  }
  return ::testing::AssertionSuccess();
}

using ::ember::testing::error_of;

}  // namespace ember::distributed::testing
