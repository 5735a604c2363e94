// The CUDA indexing kernels against the CPU backend: index_select, index_add_, gather,
// scatter_add, one_hot, cat and stack, with repeated and negative indices, strided inputs, every
// dtype each op takes; and the same out-of-range error as on the CPU.
#include <gtest/gtest.h>

#include "tensor/sparse.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

class CudaIndexingTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

const std::vector<ScalarType> kAccumulating = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                               kInt32,   kInt64,   kUInt8};

TEST_F(CudaIndexingTest, IndexSelectAlongEachDim) {
  const Tensor index = i64({2, 0, 2, -1});
  for (ScalarType dt : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor t = parity_input({5, 6, 7}, dt, 1);
    for (int64_t dim : {0, 1, 2}) {
      EXPECT_TRUE(matches_cpu([&](auto& x) { return index_select(x[0], dim, x[1]); },
                              {t, index}, 0));
    }
    EXPECT_TRUE(matches_cpu([&](auto& x) { return index_select(x[0].transpose(0, 2), 1, x[1]); },
                            {t, index}, 0));
  }
}

TEST_F(CudaIndexingTest, IndexAddAccumulatesRepeatedIndices) {
  for (ScalarType dt : kAccumulating) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor self = parity_input({5, 6}, dt, 2), src = parity_input({5, 4}, dt, 3);
    EXPECT_TRUE(matches_cpu(
        [](auto& x) {
          Tensor s = x[0].clone();
          index_add_(s, 1, x[2], x[1]);
          return s;
        },
        {self, src, i64({1, 1, -1, 3})}, device_tolerance(dt)));
  }
}

TEST_F(CudaIndexingTest, GatherAndScatterAdd) {
  const Tensor index = i64({0, 2, 1, 2, 0, 0, -1, 1}, {2, 4});
  for (ScalarType dt : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor t = parity_input({3, 5}, dt, 4);
    EXPECT_TRUE(matches_cpu([](auto& x) { return gather(x[0], 1, x[1]); },
                            {parity_input({2, 5}, dt, 4), index}, 0));
    EXPECT_TRUE(matches_cpu([](auto& x) { return gather(x[0].t(), 0, x[1].t()); },
                            {t.narrow(0, 0, 3), i64({0, 2, 1, 2, 0, 0}, {2, 3})}, 0));
    if (dt == kBool) continue;
    EXPECT_TRUE(matches_cpu([](auto& x) { return scatter_add(x[0], 1, x[1], x[2]); },
                            {parity_input({2, 5}, dt, 5), index, parity_input({2, 4}, dt, 6)},
                            device_tolerance(dt)));
  }
}

TEST_F(CudaIndexingTest, OneHotCatAndStack) {
  EXPECT_TRUE(matches_cpu([](auto& x) { return one_hot(x[0]); }, {i64({3, 0, 2, 3})}, 0));
  EXPECT_TRUE(matches_cpu([](auto& x) { return one_hot(x[0], 6); }, {i64({1, 5}, {2, 1})}, 0));
  const Tensor a = parity_input({2, 3}, kFloat32, 7), b = parity_input({4, 3}, kFloat64, 8);
  EXPECT_TRUE(matches_cpu([](auto& x) { return cat({x[0], x[1]}, 0); }, {a, b}, 0));
  EXPECT_TRUE(matches_cpu([](auto& x) { return stack({x[0], x[0].mul(2)}, 1); }, {a}, 0));
}

TEST_F(CudaIndexingTest, OutOfRangeIndicesAreTheSameErrorAsOnTheCpu) {
  const Tensor t = parity_input({4, 3}, kFloat32, 9).to(kCuda0);
  EXPECT_EMBER_ERROR(index_select(t, 0, i64({1, 4}).to(kCuda0)),
                     "index_select: index 4 is out of bounds for dimension 0 with size 4");
  EXPECT_EMBER_ERROR(gather(t, 1, i64({0, -4}, {1, 2}).to(kCuda0)),
                     "gather: index -4 is out of bounds for dimension 1 with size 3");
  EXPECT_EMBER_ERROR(one_hot(i64({0, 7}).to(kCuda0), 3), "one_hot: class value 7 out of range");
  EXPECT_EMBER_ERROR(cat({t, t.cpu()}), "cat", "same device");
}

TEST_F(CudaIndexingTest, SparseTensorsOnTheDevice) {
  // An embedding-style sparse gradient: rows 3 and 1 of a [5, 2] matrix, row 3 twice.
  const Tensor idx = i64({3, 1, 3}, {1, 3}), values = parity_input({3, 2}, kFloat32, 10);
  EXPECT_TRUE(matches_cpu([](auto& x) { return to_dense(sparse_coo_tensor(x[0], x[1], {5, 2})); },
                          {idx, values}, 0));
  EXPECT_TRUE(matches_cpu(
      [](auto& x) { return sparse_values(coalesce(sparse_coo_tensor(x[0], x[1], {5, 2}))); },
      {idx, values}, 0));
  EXPECT_TRUE(matches_cpu(
      [](auto& x) {
        Tensor dense = ones({5, 2}, TensorOptions(kFloat32, x[0].device()));
        add_sparse_to_dense_(dense, sparse_coo_tensor(x[0], x[1], {5, 2}), 0.5);
        return dense;
      },
      {idx, values}, 0));
  EXPECT_EMBER_ERROR(sparse_coo_tensor(idx, values.to(kCuda0), {5, 2}), "sparse_coo_tensor",
                     "same device");
}

}  // namespace
}  // namespace ember::testing
