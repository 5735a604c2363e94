// Reductions: sum/mean/var/max/min/argmax/argmin over dims with keepdim, full reductions, NaN
// propagation, integer sums in int64, strided inputs and empty reductions.
#include <cmath>

#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::f32;
using testing::f64;
using testing::i32;
using testing::iota;

TEST(ReductionTest, SumOverDims) {
  Tensor a = iota({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  EXPECT_TENSOR(a.sum(), (Shape{}), ({15}));
  EXPECT_TENSOR(a.sum({0}), (Shape{3}), ({3, 5, 7}));
  EXPECT_TENSOR(a.sum({1}), (Shape{2}), ({3, 12}));
  EXPECT_TENSOR(a.sum({-1}, true), (Shape{2, 1}), ({3, 12}));
  EXPECT_TENSOR(a.sum({0, 1}, true), (Shape{1, 1}), ({15}));
  Tensor b = iota({2, 3, 4});
  EXPECT_TENSOR(b.sum({0, 2}), (Shape{3}), ({0 + 1 + 2 + 3 + 12 + 13 + 14 + 15,
                                             4 + 5 + 6 + 7 + 16 + 17 + 18 + 19,
                                             8 + 9 + 10 + 11 + 20 + 21 + 22 + 23}));
  EXPECT_TENSOR(scalar_tensor(2.5).sum({0}), (Shape{}), ({2.5}));
}

TEST(ReductionTest, SumStridedAndBroadcastInputs) {
  Tensor t = iota({2, 3}).t();  // [3, 2]: [[0, 3], [1, 4], [2, 5]]
  EXPECT_TENSOR(t.sum({0}), (Shape{2}), ({3, 12}));
  EXPECT_TENSOR(t.sum({1}), (Shape{3}), ({3, 5, 7}));
  Tensor e = f32({1, 2}).expand({3, 2});
  EXPECT_TENSOR(e.sum({0}), (Shape{2}), ({3, 6}));
  EXPECT_TENSOR(e.sum(), (Shape{}), ({9}));
  EXPECT_TENSOR(iota({10}).slice(0, 0, 10, 3).sum(), (Shape{}), ({0 + 3 + 6 + 9}));
}

TEST(ReductionTest, SumDtypes) {
  EXPECT_EQ(i32({1, 2}).sum().dtype(), kInt64);
  EXPECT_EQ(zeros({2}, kUInt8).sum().dtype(), kInt64);
  EXPECT_TENSOR(testing::b8({true, true, false}).sum(), (Shape{}), ({2}));
  EXPECT_TENSOR((zeros({300}, kUInt8) + 200).sum(), (Shape{}), ({60000}));  // no uint8 wrap
  EXPECT_EQ(zeros({2}, kFloat16).sum().dtype(), kFloat16);
  // float16 sums accumulate wider than half: 4096 ones would stall at 2048 in half.
  EXPECT_TENSOR(ones({4096}, kFloat16).sum(), (Shape{}), ({4096}));
  EXPECT_TENSOR(ones({1000}, kBFloat16).sum(), (Shape{}), ({1000}));
}

TEST(ReductionTest, EmptyReductions) {
  Tensor z = empty({0, 3});
  EXPECT_TENSOR(z.sum(), (Shape{}), ({0}));
  EXPECT_TENSOR(z.sum({0}), (Shape{3}), ({0, 0, 0}));
  EXPECT_EQ(z.sum({1}).sizes(), (Shape{0}));
  EXPECT_TENSOR(z.mean({0}), (Shape{3}), ({NAN, NAN, NAN}));
  EXPECT_TENSOR(z.mean(), (Shape{}), ({NAN}));
  // max/argmax over a non-empty dim of a tensor with another empty dim: empty result.
  auto [v, i] = z.max(1);
  EXPECT_EQ(v.sizes(), (Shape{0}));
  EXPECT_EQ(i.sizes(), (Shape{0}));
  EXPECT_EQ(z.argmax(1).sizes(), (Shape{0}));
  EXPECT_EQ(argmin(z, 1, true).sizes(), (Shape{0, 1}));
  EXPECT_EMBER_ERROR(z.max(), "max", "float32[0, 3]");
  EXPECT_EMBER_ERROR(z.min(), "min", "float32[0, 3]");
  EXPECT_EMBER_ERROR(z.argmax(), "argmax", "float32[0, 3]");
  EXPECT_EMBER_ERROR(z.max(0), "argmax", "zero-size dimension", "float32[0, 3]");
  EXPECT_EMBER_ERROR(argmin(z, 0), "argmin", "zero-size dimension");
}

TEST(ReductionTest, Mean) {
  Tensor a = iota({2, 3});
  EXPECT_TENSOR(a.mean(), (Shape{}), ({2.5}));
  EXPECT_TENSOR(a.mean({0}), (Shape{3}), ({1.5, 2.5, 3.5}));
  EXPECT_TENSOR(a.mean({1}, true), (Shape{2, 1}), ({1, 4}));
  EXPECT_TENSOR(a.t().mean({1}), (Shape{3}), ({1.5, 2.5, 3.5}));
  EXPECT_EQ(a.to(kFloat16).mean().dtype(), kFloat16);
  EXPECT_EMBER_ERROR(i32({1, 2}).mean(), "mean", "floating", "int32[2]");
}

TEST(ReductionTest, Var) {
  Tensor a = f64({1, 2, 3, 4, 6, 8}, {2, 3});
  // Rows: [1, 2, 3] mean 2 -> sum sq 2; [4, 6, 8] mean 6 -> sum sq 8.
  EXPECT_TENSOR(a.var(Shape{1}), (Shape{2}), ({1, 4}));
  EXPECT_TENSOR(a.var(Shape{1}, false), (Shape{2}), ({2.0 / 3, 8.0 / 3}));
  EXPECT_TENSOR(a.var(Shape{1}, true, true), (Shape{2, 1}), ({1, 4}));
  EXPECT_TENSOR(a.var(Shape{0}), (Shape{3}), ({4.5, 8, 12.5}));
  // All six: mean 4, squared deviations 9+4+1+0+4+16 = 34.
  EXPECT_TENSOR(a.var(), (Shape{}), ({34.0 / 5}));
  EXPECT_TENSOR(a.var(false), (Shape{}), ({34.0 / 6}));
  EXPECT_TENSOR(f32({5}).var(), (Shape{}), ({NAN}));  // one sample, unbiased: 0/0
  EXPECT_TENSOR(f32({5}).var(false), (Shape{}), ({0}));
  EXPECT_EQ(a.to(kFloat32).var().dtype(), kFloat32);
  EXPECT_EMBER_ERROR(i32({1}).var(), "var", "floating", "int32");
}

TEST(ReductionTest, MaxMinFull) {
  Tensor a = f32({3, -1, 7, 2}, {2, 2});
  EXPECT_TENSOR(a.max(), (Shape{}), ({7}));
  EXPECT_TENSOR(a.min(), (Shape{}), ({-1}));
  EXPECT_TENSOR(a.argmax(), (Shape{}), ({2}));
  EXPECT_EQ(a.argmax().dtype(), kInt64);
  EXPECT_TENSOR(a.t().max(), (Shape{}), ({7}));
  EXPECT_TENSOR(i32({4, 9, 9, 1}).max(), (Shape{}), ({9}));
  EXPECT_EQ(i32({4}).max().dtype(), kInt32);
  EXPECT_TENSOR(testing::b8({false, true}).max(), (Shape{}), ({1}));
  EXPECT_TENSOR(scalar_tensor(3.0).max(), (Shape{}), ({3}));
}

TEST(ReductionTest, MaxMinAlongDim) {
  Tensor a = f32({3, 9, 1, 4, 2, 8}, {2, 3});
  auto [v0, i0] = a.max(0);
  EXPECT_TENSOR(v0, (Shape{3}), ({4, 9, 8}));
  EXPECT_TENSOR(i0, (Shape{3}), ({1, 0, 1}));
  EXPECT_EQ(i0.dtype(), kInt64);
  auto [v1, i1] = a.max(1, true);
  EXPECT_TENSOR(v1, (Shape{2, 1}), ({9, 8}));
  EXPECT_TENSOR(i1, (Shape{2, 1}), ({1, 2}));
  auto [m1, j1] = a.min(-1);
  EXPECT_TENSOR(m1, (Shape{2}), ({1, 2}));
  EXPECT_TENSOR(j1, (Shape{2}), ({2, 1}));
  EXPECT_TENSOR(a.argmax(1), (Shape{2}), ({1, 2}));
  EXPECT_TENSOR(argmin(a, 0, true), (Shape{1, 3}), ({0, 1, 0}));
  // Strided input.
  auto [tv, ti] = a.t().max(1);
  EXPECT_TENSOR(tv, (Shape{3}), ({4, 9, 8}));
  EXPECT_TENSOR(ti, (Shape{3}), ({1, 0, 1}));
  // Ties pick the first index, as PyTorch on CPU.
  EXPECT_TENSOR(f32({5, 5, 1}).argmax(0), (Shape{}), ({0}));
  EXPECT_TENSOR(argmin(f32({1, 0, 0}), 0), (Shape{}), ({1}));
  // 0-dim input: dim 0 is accepted.
  auto [sv, si] = scalar_tensor(4.0).max(0);
  EXPECT_TENSOR(sv, (Shape{}), ({4}));
  EXPECT_TENSOR(si, (Shape{}), ({0}));
  EXPECT_EMBER_ERROR(a.max(2), "dimension 2");
  EXPECT_EMBER_ERROR(a.argmax(-3), "argmax", "dimension -3");
}

TEST(ReductionTest, NaNPropagates) {
  Tensor a = f32({1, NAN, 3, 4}, {2, 2});
  EXPECT_TENSOR(a.max(), (Shape{}), ({NAN}));
  EXPECT_TENSOR(a.min(), (Shape{}), ({NAN}));
  EXPECT_TENSOR(a.sum(), (Shape{}), ({NAN}));
  EXPECT_TENSOR(a.argmax(), (Shape{}), ({1}));
  auto [v, i] = a.max(1);
  EXPECT_TENSOR(v, (Shape{2}), ({NAN, 4}));
  EXPECT_TENSOR(i, (Shape{2}), ({1, 1}));
  auto [mv, mi] = a.min(0);
  EXPECT_TENSOR(mv, (Shape{2}), ({1, NAN}));
  EXPECT_TENSOR(mi, (Shape{2}), ({0, 0}));  // column 1 is [NaN, 4]
  EXPECT_TENSOR(f32({NAN, 1}).to(kFloat16).max(), (Shape{}), ({NAN}));
  EXPECT_TENSOR(argmin(f32({2, NAN, 5}).to(kBFloat16), 0), (Shape{}), ({1}));
}

TEST(ReductionTest, DimErrors) {
  Tensor a = iota({2, 3});
  EXPECT_EMBER_ERROR(a.sum({2}), "sum", "dimension 2", "2 dims");
  EXPECT_EMBER_ERROR(a.sum({0, 0}), "sum", "dim 0", "multiple times");
  EXPECT_EMBER_ERROR(a.sum({1, -1}), "sum", "multiple times", "[1, -1]");
  EXPECT_EMBER_ERROR(a.mean({-3}), "mean", "dimension -3");
  EXPECT_EMBER_ERROR(var(a, Shape{5}), "var", "dimension 5");
}

}  // namespace
}  // namespace ember
