// Joining and indexing: cat (incl. PyTorch's skipping of 1-d empties), stack, index_select,
// index_add_, gather, scatter_add, one_hot, allclose and equal.
#include <cmath>

#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::f32;
using testing::i32;
using testing::i64;
using testing::iota;

TEST(IndexingTest, Cat) {
  Tensor a = iota({2, 2}), b = f32({9, 8}, {1, 2});
  EXPECT_TENSOR(cat({a, b}), (Shape{3, 2}), ({0, 1, 2, 3, 9, 8}));
  EXPECT_TENSOR(cat({a, b.t()}, 1), (Shape{2, 3}), ({0, 1, 9, 2, 3, 8}));
  EXPECT_TENSOR(cat({a.t(), a}, -1), (Shape{2, 4}), ({0, 2, 0, 1, 1, 3, 2, 3}));
  EXPECT_EQ(cat({i32({1}), f32({2})}).dtype(), kFloat32);  // promoted
  // 1-d empty tensors are skipped (legacy PyTorch behaviour), other empties take part.
  EXPECT_TENSOR(cat({empty({0}), a, empty({0})}), (Shape{2, 2}), ({0, 1, 2, 3}));
  EXPECT_TENSOR(cat({empty({0, 2}), a}), (Shape{2, 2}), ({0, 1, 2, 3}));
  EXPECT_EQ(cat({empty({0}), empty({0})}).sizes(), (Shape{0}));
  Tensor out = cat({a});
  EXPECT_FALSE(out.is_alias_of(a));  // always a new tensor
}

TEST(IndexingTest, CatErrors) {
  EXPECT_EMBER_ERROR(cat({}), "cat", "non-empty list");
  EXPECT_EMBER_ERROR(cat({zeros({2, 2}), zeros({2, 3})}), "cat", "except in dimension 0",
                     "float32[2, 2]", "float32[2, 3]");
  EXPECT_EMBER_ERROR(cat({zeros({2, 2}), zeros({2})}), "cat", "same number of dims",
                     "float32[2, 2]", "float32[2]");
  EXPECT_EMBER_ERROR(cat({scalar_tensor(1.0)}), "cat", "zero-dimensional");
  EXPECT_EMBER_ERROR(cat({zeros({2}), zeros({2})}, 1), "cat", "dimension 1");
  EXPECT_EMBER_ERROR(cat({zeros({2}), Tensor()}), "cat", "undefined");
}

TEST(IndexingTest, Stack) {
  Tensor a = f32({1, 2}), b = f32({3, 4});
  EXPECT_TENSOR(stack({a, b}), (Shape{2, 2}), ({1, 2, 3, 4}));
  EXPECT_TENSOR(stack({a, b}, 1), (Shape{2, 2}), ({1, 3, 2, 4}));
  EXPECT_TENSOR(stack({a, b}, -1), (Shape{2, 2}), ({1, 3, 2, 4}));
  EXPECT_TENSOR(stack({scalar_tensor(1.0), scalar_tensor(2.0)}), (Shape{2}), ({1, 2}));
  EXPECT_EQ(stack({empty({0}), empty({0})}).sizes(), (Shape{2, 0}));
  EXPECT_EMBER_ERROR(stack({a, f32({1})}), "stack", "equal size", "[2]", "[1]", "entry 1");
  EXPECT_EMBER_ERROR(stack({}), "stack", "non-empty");
  EXPECT_EMBER_ERROR(stack({a, b}, 3), "stack", "dimension 3");
}

TEST(IndexingTest, IndexSelect) {
  Tensor a = iota({3, 2});
  Tensor idx = i64({2, 0, 2});
  EXPECT_TENSOR(a.index_select(0, idx), (Shape{3, 2}), ({4, 5, 0, 1, 4, 5}));
  EXPECT_TENSOR(a.index_select(1, i32({1})), (Shape{3, 1}), ({1, 3, 5}));
  EXPECT_TENSOR(a.t().index_select(0, i64({1})), (Shape{1, 3}), ({1, 3, 5}));  // strided input
  EXPECT_TENSOR(a.index_select(0, i64({-1})), (Shape{1, 2}), ({4, 5}));
  EXPECT_TENSOR(a.index_select(0, scalar_tensor(1, kInt64)), (Shape{1, 2}), ({2, 3}));
  EXPECT_EQ(a.index_select(0, empty({0}, kInt64)).sizes(), (Shape{0, 2}));
  EXPECT_EQ(empty({0, 2}).index_select(1, i64({1})).sizes(), (Shape{0, 1}));
  EXPECT_EMBER_ERROR(a.index_select(0, i64({3})), "index_select", "index 3", "size 3");
  EXPECT_EMBER_ERROR(a.index_select(0, f32({0})), "index_select", "int64", "float32[1]");
  EXPECT_EMBER_ERROR(a.index_select(0, zeros({1, 1}, kInt64)), "index_select", "1-d",
                     "int64[1, 1]");
  EXPECT_EMBER_ERROR(a.index_select(2, i64({0})), "index_select", "dimension 2");
}

TEST(IndexingTest, IndexAdd) {
  Tensor self = zeros({3, 2});
  index_add_(self, 0, i64({2, 0, 2}), iota({3, 2}));
  EXPECT_TENSOR(self, (Shape{3, 2}), ({2, 3, 0, 0, 4 + 0, 5 + 1}));
  Tensor s2 = zeros({2, 3});
  index_add_(s2, 1, i64({1}), f32({5, 6}, {2, 1}));
  EXPECT_TENSOR(s2, (Shape{2, 3}), ({0, 5, 0, 0, 6, 0}));
  Tensor t = zeros({3, 2}).t();  // strided self
  index_add_(t, 1, i64({0, 0}), ones({2, 2}));
  EXPECT_TENSOR(t, (Shape{2, 3}), ({2, 0, 0, 2, 0, 0}));
  EXPECT_EMBER_ERROR(index_add_(self, 0, i64({0}), zeros({2, 2})), "index_add_", "float32[2, 2]",
                     "[1, 2]");
  EXPECT_EMBER_ERROR(index_add_(self, 0, i64({5}), zeros({1, 2})), "index_add_", "index 5");
  EXPECT_EMBER_ERROR(index_add_(self, 0, f32({0}), zeros({1, 2})), "index_add_", "int64");
}

TEST(IndexingTest, Gather) {
  Tensor a = iota({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  EXPECT_TENSOR(a.gather(1, i64({2, 0, 1, 1}, {2, 2})), (Shape{2, 2}), ({2, 0, 4, 4}));
  EXPECT_TENSOR(a.gather(0, i64({1, 0, 1}, {1, 3})), (Shape{1, 3}), ({3, 1, 5}));
  EXPECT_TENSOR(a.t().gather(0, i64({2, 0}, {1, 2})), (Shape{1, 2}), ({2, 3}));
  EXPECT_TENSOR(a.gather(1, i64({-1}, {1, 1})), (Shape{1, 1}), ({2}));
  EXPECT_EQ(a.gather(1, empty({2, 0}, kInt64)).sizes(), (Shape{2, 0}));
  EXPECT_EQ(i32({1, 2}).gather(0, i64({1})).dtype(), kInt32);
  EXPECT_EMBER_ERROR(a.gather(1, i64({3}, {1, 1})), "gather", "index 3", "size 3");
  EXPECT_EMBER_ERROR(a.gather(1, i64({0})), "gather", "as many dims", "int64[1]", "float32[2, 3]");
  EXPECT_EMBER_ERROR(a.gather(1, zeros({3, 1}, kInt64)), "gather", "larger", "dimension 0");
}

TEST(IndexingTest, ScatterAdd) {
  Tensor base = zeros({2, 3});
  Tensor idx = i64({0, 2, 0, 1, 1, 1}, {2, 3});
  Tensor src = iota({2, 3}).add(1);  // [[1, 2, 3], [4, 5, 6]]
  Tensor out = base.scatter_add(1, idx, src);
  EXPECT_TENSOR(out, (Shape{2, 3}), ({1 + 3, 0, 2, 0, 4 + 5 + 6, 0}));
  EXPECT_TENSOR(base, (Shape{2, 3}), ({0, 0, 0, 0, 0, 0}));  // out-of-place leaves self alone
  Tensor in = zeros({3});
  scatter_add_(in, 0, i64({0, 0, 2}), f32({1, 2, 3}));
  EXPECT_TENSOR(in, (Shape{3}), ({3, 0, 3}));
  // index smaller than src: only the indexed part of src is used.
  Tensor s = zeros({2}).scatter_add(0, i64({1}), f32({7, 100}));
  EXPECT_TENSOR(s, (Shape{2}), ({0, 7}));
  EXPECT_EMBER_ERROR(zeros({2}).scatter_add(0, i64({2}), f32({1})), "scatter_add_", "index 2");
  EXPECT_EMBER_ERROR(zeros({2}).scatter_add(0, i64({0}), zeros({1}, kFloat64)), "scatter_add_",
                     "float32[2]", "float64[1]", "same dtype");
  EXPECT_EMBER_ERROR(zeros({2}).scatter_add(0, i64({0, 1}), f32({1})), "scatter_add_", "src");
}

TEST(IndexingTest, OneHot) {
  EXPECT_TENSOR(one_hot(i64({0, 2, 1})), (Shape{3, 3}), ({1, 0, 0, 0, 0, 1, 0, 1, 0}));
  EXPECT_TENSOR(one_hot(i64({1, 0}, {2, 1}), 3), (Shape{2, 1, 3}), ({0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(one_hot(i64({0})).dtype(), kInt64);
  EXPECT_EQ(one_hot(empty({0}, kInt64), 4).sizes(), (Shape{0, 4}));
  EXPECT_TENSOR(one_hot(i64({0, 1, 2}).slice(0, 0, 3, 2), 3), (Shape{2, 3}), ({1, 0, 0, 0, 0, 1}));
  EXPECT_EMBER_ERROR(one_hot(i64({3}), 3), "one_hot", "class value 3", "[0, 3)");
  EXPECT_EMBER_ERROR(one_hot(i64({-1}), 3), "one_hot", "-1");
  EXPECT_EMBER_ERROR(one_hot(i32({0})), "one_hot", "int64", "int32[1]");
  EXPECT_EMBER_ERROR(one_hot(empty({0}, kInt64)), "one_hot", "empty");
}

TEST(IndexingTest, AllcloseAndEqual) {
  Tensor a = f32({1, 2, 3});
  EXPECT_TRUE(allclose(a, a.add(1e-7)));
  EXPECT_FALSE(allclose(a, a.add(1e-3)));
  EXPECT_TRUE(allclose(a, a.add(1e-3), 1e-3));
  EXPECT_TRUE(allclose(a, a.add(0.1), 0, 0.11));
  EXPECT_TRUE(allclose(a, f32({2}).sub(1).expand({3}).add(f32({0, 1, 2}))));  // broadcast
  EXPECT_TRUE(allclose(f32({1, 2}), f32({1.0f, 2.0f}, {2}).to(kInt64)));       // mixed dtypes
  EXPECT_FALSE(allclose(f32({NAN}), f32({NAN})));
  EXPECT_TRUE(allclose(f32({NAN}), f32({NAN}), 1e-5, 1e-8, true));
  EXPECT_TRUE(allclose(f32({INFINITY}), f32({INFINITY})));
  EXPECT_FALSE(allclose(f32({INFINITY}), f32({-INFINITY})));
  EXPECT_FALSE(allclose(f32({INFINITY}), f32({1e30f})));
  EXPECT_TRUE(allclose(empty({0}), empty({0})));
  EXPECT_EMBER_ERROR(allclose(zeros({2}), zeros({3})), "allclose", "[2]", "[3]");

  EXPECT_TRUE(equal(a, f32({1, 2, 3})));
  EXPECT_FALSE(equal(a, f32({1, 2, 4})));
  EXPECT_FALSE(equal(a, f32({1, 2, 3, 4})));
  EXPECT_FALSE(equal(f32({1}), f32({1}, {1, 1})));  // same values, different shape
  EXPECT_TRUE(equal(iota({2, 2}).t(), f32({0, 2, 1, 3}, {2, 2})));
  EXPECT_FALSE(equal(f32({NAN}), f32({NAN})));
  EXPECT_TRUE(equal(empty({0}), empty({0})));
}

}  // namespace
}  // namespace ember
