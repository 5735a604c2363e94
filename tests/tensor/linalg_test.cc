// Matrix products: mm, bmm, matmul for every rank combination (1-d, 2-d, batched with broadcast
// batch dims), addmm with beta/alpha, transposed/strided/expanded operands, half/bf16 and empty
// inner dimensions. Expected values are written out by hand.
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::f32;
using testing::f64;
using testing::i32;
using testing::i64;
using testing::iota;

// A = [[0, 1, 2], [3, 4, 5]], B = [[0, 1], [2, 3], [4, 5]]: A @ B = [[10, 13], [28, 40]].
TEST(LinalgTest, Mm) {
  Tensor a = iota({2, 3}), b = iota({3, 2});
  EXPECT_TENSOR(mm(a, b), (Shape{2, 2}), ({10, 13, 28, 40}));
  EXPECT_TENSOR(a.mm(b), (Shape{2, 2}), ({10, 13, 28, 40}));
  EXPECT_TENSOR(mm(b, a), (Shape{3, 3}), ({3, 4, 5, 9, 14, 19, 15, 24, 33}));
  EXPECT_TENSOR(mm(iota({2, 3}, kFloat64), iota({3, 2}, kFloat64)), (Shape{2, 2}),
                ({10, 13, 28, 40}));
  EXPECT_TENSOR(mm(iota({2, 3}, kInt64), iota({3, 2}, kInt64)), (Shape{2, 2}), ({10, 13, 28, 40}));
  EXPECT_EQ(mm(iota({2, 3}, kInt32), iota({3, 2}, kInt32)).dtype(), kInt32);
}

TEST(LinalgTest, MmTransposedAndStridedOperands) {
  Tensor at = iota({3, 2}).t();  // [[0, 2, 4], [1, 3, 5]] (column-major)
  Tensor bt = iota({2, 3}).t();  // [[0, 3], [1, 4], [2, 5]]
  // at @ bt = [[0+2+8, 0+8+20], [0+3+10, 3+12+25]]
  EXPECT_TENSOR(mm(at, bt), (Shape{2, 2}), ({10, 28, 13, 40}));
  // Neither row- nor column-major: every other column of a wider matrix.
  Tensor s = iota({3, 4}).slice(1, 0, 4, 2);  // [[0, 2], [4, 6], [8, 10]]
  EXPECT_TENSOR(mm(iota({2, 3}), s), (Shape{2, 2}), ({20, 26, 56, 80}));
  // Row views with a larger leading stride.
  Tensor n = iota({2, 5}).narrow(1, 1, 3);  // [[1, 2, 3], [6, 7, 8]]
  EXPECT_TENSOR(mm(n, iota({3, 2})), (Shape{2, 2}), ({16, 22, 46, 67}));
  // Expanded (stride 0) operands: every row of the left matrix is [1, 2, 3].
  Tensor e = f32({1, 2, 3}).expand({2, 3});
  EXPECT_TENSOR(mm(e, iota({3, 2})), (Shape{2, 2}), ({16, 22, 16, 22}));
  Tensor col = f32({1, 1, 1}, {3, 1}).expand({3, 2});  // all ones, strides [1, 0]
  EXPECT_TENSOR(mm(iota({2, 3}), col), (Shape{2, 2}), ({3, 3, 12, 12}));
  Tensor one = f32({2}, {1, 1}).expand({3, 1});  // [3, 1] of twos, stride 0 rows
  EXPECT_TENSOR(mm(iota({2, 3}), one), (Shape{2, 1}), ({6, 24}));
}

// Integer products take their own loop (gemm_kernels.cc): every layout, beta/alpha, and wrapping
// on overflow as PyTorch's (two's complement).
TEST(LinalgTest, IntegerProducts) {
  for (ScalarType dt : {kInt32, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor at = iota({3, 2}, dt).t();                   // [[0, 2, 4], [1, 3, 5]], column-major
    Tensor s = iota({3, 4}, dt).slice(1, 0, 4, 2);      // [[0, 2], [4, 6], [8, 10]], strided
    Tensor e = iota({3}, dt).expand({2, 3});            // rows [0, 1, 2], stride 0
    EXPECT_TENSOR(mm(at, s), (Shape{2, 2}), ({40, 52, 52, 70}));
    EXPECT_TENSOR(mm(e, s), (Shape{2, 2}), ({20, 26, 20, 26}));
    // beta * self + alpha * (at @ s), and beta 0 ignores self.
    Tensor self = iota({2, 2}, dt);
    EXPECT_TENSOR(addmm(self, at, s, 2, 3), (Shape{2, 2}), ({120, 158, 160, 216}));
    EXPECT_TENSOR(addmm(self, at, s, 0, 1), (Shape{2, 2}), ({40, 52, 52, 70}));
  }
  // 2^16 * 2^16 wraps to 0 in int32; 2^62 * 2 + 2^62 * 2 to 0 in int64.
  EXPECT_TENSOR(mm(i32({65536}).reshape({1, 1}), i32({65536}).reshape({1, 1})), (Shape{1, 1}), ({0}));
  Tensor big = full({1, 2}, Scalar(int64_t{1} << 62), kInt64);
  EXPECT_TENSOR(mm(big, full({2, 1}, Scalar(int64_t{2}), kInt64)), (Shape{1, 1}), ({0}));
}

TEST(LinalgTest, MatmulRankCombinations) {
  Tensor v3 = f32({1, 2, 3});
  // 1-d x 1-d: dot, 0-dim result.
  EXPECT_TENSOR(matmul(v3, f32({4, 5, 6})), (Shape{}), ({32}));
  // 2-d x 1-d: matrix-vector.
  EXPECT_TENSOR(matmul(iota({2, 3}), v3), (Shape{2}), ({8, 26}));
  // 1-d x 2-d: vector-matrix.
  EXPECT_TENSOR(matmul(v3, iota({3, 2})), (Shape{2}), ({16, 22}));
  // 2-d x 2-d.
  EXPECT_TENSOR(matmul(iota({2, 3}), iota({3, 2})), (Shape{2, 2}), ({10, 13, 28, 40}));
  // 3-d x 3-d.
  Tensor a = iota({2, 2, 3}), b = iota({2, 3, 1});
  // batch 0: [[0,1,2],[3,4,5]] @ [0,1,2]^T = [5, 14]; batch 1: [[6,7,8],[9,10,11]] @ [3,4,5]^T
  EXPECT_TENSOR(matmul(a, b), (Shape{2, 2, 1}), ({5, 14, 86, 122}));
  // 3-d x 2-d: the matrix broadcasts over the batch.
  EXPECT_TENSOR(matmul(a, f32({1, 0, 0}, {3, 1})), (Shape{2, 2, 1}), ({0, 3, 6, 9}));
  // 2-d x 3-d.
  EXPECT_TENSOR(matmul(f32({1, 1}, {1, 2}), a), (Shape{2, 1, 3}), ({3, 5, 7, 15, 17, 19}));
  // 3-d x 1-d and 1-d x 3-d drop the vector's dim.
  EXPECT_TENSOR(matmul(a, v3), (Shape{2, 2}), ({8, 26, 44, 62}));
  EXPECT_TENSOR(matmul(f32({1, -1}), a), (Shape{2, 3}), ({-3, -3, -3, -3, -3, -3}));
  // Broadcast batch dims: [2, 1, 1, 2] x [3, 2, 1] -> [2, 3, 1, 1].
  Tensor l = f32({1, 2, 3, 4}, {2, 1, 1, 2});
  Tensor r = f32({1, 0, 0, 1, 1, 1}, {3, 2, 1});
  EXPECT_TENSOR(matmul(l, r), (Shape{2, 3, 1, 1}), ({1, 2, 3, 3, 4, 7}));
  // 4-d x 4-d with a transposed operand.
  Tensor x = iota({1, 2, 2, 2});
  EXPECT_TENSOR(matmul(x, x.transpose(-1, -2)), (Shape{1, 2, 2, 2}),
                ({1, 3, 3, 13, 41, 59, 59, 85}));
}

TEST(LinalgTest, Bmm) {
  Tensor a = iota({2, 2, 3}), b = iota({2, 3, 1});
  EXPECT_TENSOR(bmm(a, b), (Shape{2, 2, 1}), ({5, 14, 86, 122}));
  EXPECT_TENSOR(a.bmm(b.transpose(1, 2).transpose(1, 2)), (Shape{2, 2, 1}), ({5, 14, 86, 122}));
  // A permuted batch (batch stride not the outermost).
  Tensor p = iota({2, 2, 3}).permute({1, 0, 2});  // [2, 2, 3]
  EXPECT_TENSOR(bmm(p, f32({1, 1, 1}).expand({2, 3}).unsqueeze(2)), (Shape{2, 2, 1}),
                ({3, 21, 12, 30}));
}

TEST(LinalgTest, Addmm) {
  Tensor m1 = iota({2, 3}), m2 = iota({3, 2});
  Tensor self = f32({1, 2, 3, 4}, {2, 2});
  EXPECT_TENSOR(addmm(self, m1, m2), (Shape{2, 2}), ({11, 15, 31, 44}));
  EXPECT_TENSOR(addmm(self, m1, m2, 0.5, 2), (Shape{2, 2}), ({20.5, 27, 57.5, 82}));
  // self broadcasts (a bias row).
  EXPECT_TENSOR(addmm(f32({100, 200}), m1, m2), (Shape{2, 2}), ({110, 213, 128, 240}));
  // beta = 0 ignores self, NaN included.
  EXPECT_TENSOR(addmm(f32({NAN, NAN}), m1, m2, 0, 1), (Shape{2, 2}), ({10, 13, 28, 40}));
  // The product does not write into self.
  EXPECT_TENSOR(self, (Shape{2, 2}), ({1, 2, 3, 4}));
  EXPECT_TENSOR(addmm(self, m1.t().t(), iota({2, 3}).t(), 1, -1), (Shape{2, 2}),
                ({1 - 5, 2 - 14, 3 - 14, 4 - 50}));
}

TEST(LinalgTest, ReducedPrecision) {
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    Tensor r = mm(iota({2, 3}, dt), iota({3, 2}, dt));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_TENSOR(r, (Shape{2, 2}), ({10, 13, 28, 40}));
    EXPECT_TENSOR(matmul(iota({2, 3}, dt).t(), f32({1, 1}).to(dt)), (Shape{3}), ({3, 5, 7}));
    EXPECT_TENSOR(addmm(ones({2}, dt), iota({2, 3}, dt), iota({3, 2}, dt), 2, 1), (Shape{2, 2}),
                  ({12, 15, 30, 42}));
  }
  // float16 products accumulate in float: 300 * 300 = 90000 would overflow half partial sums only
  // if it were not rounded once at the end; the result itself is inf in half.
  EXPECT_TENSOR(mm(full({1, 2}, 0.5, kFloat16), full({2, 1}, 0.5, kFloat16)), (Shape{1, 1}),
                ({0.5}));
}

TEST(LinalgTest, ZeroSize) {
  // Empty inner dim: the product is all zeros.
  EXPECT_TENSOR(mm(empty({2, 0}), empty({0, 3})), (Shape{2, 3}), ({0, 0, 0, 0, 0, 0}));
  EXPECT_TENSOR(matmul(empty({0}), empty({0})), (Shape{}), ({0}));
  EXPECT_TENSOR(addmm(f32({1, 2}), empty({2, 0}), empty({0, 2}), 3, 1), (Shape{2, 2}),
                ({3, 6, 3, 6}));
  // An integer self is scaled by beta as an integer.
  EXPECT_TENSOR(addmm(i32({1, 2}), empty({2, 0}, kInt32), empty({0, 2}, kInt32), 3, 1),
                (Shape{2, 2}), ({3, 6, 3, 6}));
  EXPECT_TENSOR(addmm(i64({1, 2}), empty({2, 0}, kInt64), empty({0, 2}, kInt64)), (Shape{2, 2}),
                ({1, 2, 1, 2}));
  EXPECT_TENSOR(bmm(empty({2, 1, 0}), empty({2, 0, 1})), (Shape{2, 1, 1}), ({0, 0}));
  // Empty outer dims.
  EXPECT_EQ(mm(empty({0, 3}), iota({3, 2})).sizes(), (Shape{0, 2}));
  EXPECT_EQ(matmul(empty({0, 2, 3}), iota({3, 4})).sizes(), (Shape{0, 2, 4}));
  EXPECT_EQ(bmm(empty({0, 2, 3}), empty({0, 3, 4})).sizes(), (Shape{0, 2, 4}));
}

TEST(LinalgTest, Errors) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  EXPECT_EMBER_ERROR(mm(a, b), "mm", "2x3", "4x5");
  EXPECT_EMBER_ERROR(mm(zeros({3}), a), "mm", "2-d", "float32[3]", "float32[2, 3]");
  EXPECT_EMBER_ERROR(mm(a, zeros({3, 2}, kFloat64)), "mm", "same dtype", "float32[2, 3]",
                     "float64[3, 2]");
  EXPECT_EMBER_ERROR(mm(zeros({1, 1}, kBool), zeros({1, 1}, kBool)), "bool");
  EXPECT_EMBER_ERROR(bmm(zeros({2, 2, 3}), zeros({3, 3, 2})), "bmm", "batch", "[2, 2, 3]",
                     "[3, 3, 2]");
  EXPECT_EMBER_ERROR(bmm(zeros({2, 2, 3}), zeros({2, 2, 2})), "bmm", "[2, 2, 3]", "[2, 2, 2]");
  EXPECT_EMBER_ERROR(bmm(a, a), "bmm", "3-d", "float32[2, 3]");
  EXPECT_EMBER_ERROR(matmul(a, b), "matmul", "[2, 3]", "[4, 5]");
  EXPECT_EMBER_ERROR(matmul(zeros({3}), zeros({4})), "matmul", "[3]", "[4]");
  EXPECT_EMBER_ERROR(matmul(scalar_tensor(1.0), a), "matmul", "at least 1", "float32[]");
  EXPECT_EMBER_ERROR(matmul(zeros({2, 2, 3}), zeros({3, 3, 1})), "matmul", "[2]", "[3]");
  EXPECT_EMBER_ERROR(addmm(zeros({3}), a, zeros({3, 2})), "addmm", "float32[3]", "[2, 2]");
  EXPECT_EMBER_ERROR(addmm(zeros({2}, kFloat64), a, zeros({3, 2})), "addmm", "float64[2]");
  EXPECT_EMBER_ERROR(addmm(zeros({2}), a, b), "addmm", "2x3", "4x5");
  EXPECT_EMBER_ERROR(addmm(zeros({2}), zeros({2}), b), "addmm", "2-d", "float32[2]");
}

}  // namespace
}  // namespace ember
