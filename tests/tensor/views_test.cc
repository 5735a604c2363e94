// Views: every view shares storage with its base (no copy), has the geometry PyTorch gives it, and
// rejects bad arguments with a message naming the op and the shapes.
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::iota;
using testing::values;

// A view must alias its base and write through to it.
void expect_view_of(const Tensor& v, const Tensor& base) {
  EXPECT_TRUE(v.is_alias_of(base));
  EXPECT_EQ(v.storage().unsafe_impl(), base.storage().unsafe_impl());
}

TEST(ViewsTest, ViewContiguous) {
  Tensor a = iota({2, 3, 4});
  Tensor v = a.view({6, 4});
  expect_view_of(v, a);
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(a.view({-1}).sizes(), (Shape{24}));
  EXPECT_EQ(a.view({4, -1, 2}).sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(a.view({1, 24, 1}).strides()[1], 1);
  v.select(0, 5).fill_(-1);  // writes through
  EXPECT_EQ(a[1][2][3].item<float>(), -1);
  EXPECT_EQ(scalar_tensor(3.0).view({1, 1}).sizes(), (Shape{1, 1}));
  EXPECT_EQ(iota({1}).view({}).dim(), 0);
  EXPECT_EQ(empty({0, 3}).view({3, 0, 5}).sizes(), (Shape{3, 0, 5}));
}

TEST(ViewsTest, ViewOfNonContiguousWhereLayoutAllows) {
  Tensor a = iota({4, 6}).narrow(1, 0, 3);  // rows of 3 inside rows of 6
  Tensor v = a.view({2, 2, 3});             // splitting the row dim is fine
  expect_view_of(v, a);
  EXPECT_EQ(v.strides(), (Shape{12, 6, 1}));
  EXPECT_EQ(values(v), values(a));
  Tensor t = iota({3, 4}).t();  // [4, 3] with strides [1, 4]
  EXPECT_EQ(t.view({2, 2, 3}).strides(), (Shape{2, 1, 4}));
}

TEST(ViewsTest, ViewErrors) {
  Tensor a = iota({2, 3});
  EXPECT_EMBER_ERROR(a.view({4}), "view", "[4]", "invalid for input of size 6");
  EXPECT_EMBER_ERROR(a.view({-1, -1}), "view", "only one dimension can be inferred");
  EXPECT_EMBER_ERROR(a.view({-2, 3}), "view", "negative dimension");
  EXPECT_EMBER_ERROR(a.view({4, -1}), "view", "[4, -1]", "invalid for input of size 6");
  EXPECT_EMBER_ERROR(empty({0}).view({-1, 0}), "view", "[-1, 0]");
  // A transposed tensor cannot be flattened without a copy.
  EXPECT_EMBER_ERROR(a.t().view({6}), "view", "[6]", "[3, 2]", "[1, 3]", "reshape");
}

// torch.split(t, 2, dim): views of 2 along dim, the last shorter; split_size 0 only when empty.
TEST(ViewsTest, SplitGivesViewsTheLastShorter) {
  Tensor a = iota({5, 3});
  std::vector<Tensor> parts = split(a, 2, 0);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].sizes(), (Shape{2, 3}));
  EXPECT_EQ(parts[2].sizes(), (Shape{1, 3}));
  for (const Tensor& p : parts) expect_view_of(p, a);
  EXPECT_EQ(values(parts[2]), (std::vector<double>{12, 13, 14}));
  std::vector<Tensor> columns = split(a, 3, -1);
  ASSERT_EQ(columns.size(), 1u);
  EXPECT_EQ(columns[0].sizes(), (Shape{5, 3}));
  EXPECT_EQ(split(empty({0, 2}), 0, 0).size(), 1u);
  EXPECT_EMBER_ERROR(split(a, 0, 0), "split", "split_size 0 must be positive");
  EXPECT_EMBER_ERROR(split(a, 2, 2), "split");
  EXPECT_EMBER_ERROR(split(scalar_tensor(1.0), 1, 0), "split", "0-dim");
}

TEST(ViewsTest, ReshapeViewsWhenPossibleCopiesOtherwise) {
  Tensor a = iota({2, 3});
  Tensor r = a.reshape({3, 2});
  expect_view_of(r, a);
  Tensor t = a.t();
  Tensor c = t.reshape({6});  // not viewable: copies, in t's logical order
  EXPECT_FALSE(c.is_alias_of(a));
  EXPECT_TENSOR(c, (Shape{6}), ({0, 3, 1, 4, 2, 5}));
  Tensor e = iota({1, 3}).expand({2, 3}).reshape({6});
  EXPECT_TENSOR(e, (Shape{6}), ({0, 1, 2, 0, 1, 2}));
  EXPECT_EMBER_ERROR(a.reshape({5}), "reshape", "[5]", "size 6");
}

TEST(ViewsTest, Permute) {
  Tensor a = iota({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  expect_view_of(p, a);
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p[3][1][2].item<float>(), 1 * 12 + 2 * 4 + 3);
  EXPECT_EQ(a.permute({-1, -3, -2}).sizes(), (Shape{4, 2, 3}));
  EXPECT_EMBER_ERROR(a.permute({0, 1}), "permute", "[0, 1]", "float32[2, 3, 4]");
  EXPECT_EMBER_ERROR(a.permute({0, 1, 1}), "permute", "repeat");
  EXPECT_EMBER_ERROR(a.permute({0, 1, 3}), "permute", "dimension 3");
}

TEST(ViewsTest, TransposeAndT) {
  Tensor a = iota({2, 3});
  Tensor t = a.t();
  expect_view_of(t, a);
  EXPECT_TENSOR(t, (Shape{3, 2}), ({0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(iota({2, 3, 4}).transpose(0, -1).sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(iota({5}).t().sizes(), (Shape{5}));
  EXPECT_EQ(scalar_tensor(1.0).t().dim(), 0);
  EXPECT_EQ(scalar_tensor(1.0).transpose(0, -1).dim(), 0);
  EXPECT_EMBER_ERROR(iota({2, 3, 4}).t(), "t", "<= 2 dims", "float32[2, 3, 4]");
  EXPECT_EMBER_ERROR(a.transpose(0, 2), "transpose", "dimension 2");
}

TEST(ViewsTest, NarrowAndSlice) {
  Tensor a = iota({4, 5});
  Tensor n = a.narrow(1, 1, 3);
  expect_view_of(n, a);
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_TENSOR(n.select(0, 1), (Shape{3}), ({6, 7, 8}));
  EXPECT_TENSOR(a.narrow(0, -1, 1), (Shape{1, 5}), ({15, 16, 17, 18, 19}));
  EXPECT_EQ(a.narrow(0, 4, 0).sizes(), (Shape{0, 5}));
  EXPECT_EMBER_ERROR(a.narrow(0, 3, 2), "narrow", "exceeds dimension 0 of size 4", "float32[4, 5]");
  EXPECT_EMBER_ERROR(a.narrow(1, 6, 0), "narrow", "start 6", "size 5");
  EXPECT_EMBER_ERROR(a.narrow(0, 0, -1), "narrow", "length (-1)");
  EXPECT_EMBER_ERROR(scalar_tensor(1.0).narrow(0, 0, 1), "narrow", "0-dim");

  Tensor r = iota({10});
  Tensor s = r.slice(0, 1, 8, 3);
  expect_view_of(s, r);
  EXPECT_EQ(s.strides(), (Shape{3}));
  EXPECT_TENSOR(s, (Shape{3}), ({1, 4, 7}));
  EXPECT_TENSOR(r.slice(0, -3, 10), (Shape{3}), ({7, 8, 9}));
  EXPECT_TENSOR(r.slice(0, 0, -8, 1), (Shape{2}), ({0, 1}));
  EXPECT_TENSOR(r.slice(0, -100, 100, 4), (Shape{3}), ({0, 4, 8}));  // bounds clamp
  EXPECT_EQ(r.slice(0, 7, 3).numel(), 0);                              // empty, not negative
  EXPECT_TENSOR(iota({3, 4}).slice(1, 1, 4, 2), (Shape{3, 2}), ({1, 3, 5, 7, 9, 11}));
  EXPECT_EMBER_ERROR(r.slice(0, 0, 5, 0), "slice", "step must be positive", "0");
  EXPECT_EMBER_ERROR(r.slice(0, 0, 5, -1), "slice", "step", "-1");
  EXPECT_EMBER_ERROR(r.slice(1, 0, 5), "slice", "dimension 1");
}

TEST(ViewsTest, Select) {
  Tensor a = iota({3, 4});
  Tensor row = a.select(0, -1);
  expect_view_of(row, a);
  EXPECT_TENSOR(row, (Shape{4}), ({8, 9, 10, 11}));
  EXPECT_TENSOR(a.select(1, 2), (Shape{3}), ({2, 6, 10}));
  EXPECT_EQ(a[1][1].dim(), 0);
  EXPECT_EMBER_ERROR(a.select(0, 3), "select", "index 3", "size 3", "float32[3, 4]");
  EXPECT_EMBER_ERROR(a.select(1, -5), "select", "index -5");
  EXPECT_EMBER_ERROR(scalar_tensor(1.0).select(0, 0), "select", "0-dim");
}

TEST(ViewsTest, Expand) {
  Tensor a = iota({3, 1});
  Tensor e = a.expand({2, 3, 4});
  expect_view_of(e, a);
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(values(e).size(), 24u);
  EXPECT_EQ(e[1][2][3].item<float>(), 2);
  EXPECT_EQ(a.expand({-1, 5}).sizes(), (Shape{3, 5}));
  EXPECT_EQ(a.expand_as(zeros({3, 7})).sizes(), (Shape{3, 7}));
  EXPECT_EQ(iota({1}).expand({0}).sizes(), (Shape{0}));
  EXPECT_EQ(scalar_tensor(2.0).expand({2, 2}).strides(), (Shape{0, 0}));
  EXPECT_EMBER_ERROR(a.expand({3, 2, 4}), "expand", "(2)", "existing size (3)",
                     "dimension 1", "[3, 2, 4]", "[3, 1]");
  EXPECT_EMBER_ERROR(a.expand({4}), "expand", "number of sizes", "float32[3, 1]");
  EXPECT_EMBER_ERROR(a.expand({-1, 3, 1}), "expand", "-1", "leading");
}

TEST(ViewsTest, SqueezeUnsqueeze) {
  Tensor a = iota({1, 3, 1, 2});
  EXPECT_EQ(a.squeeze().sizes(), (Shape{3, 2}));
  expect_view_of(a.squeeze(), a);
  EXPECT_EQ(a.squeeze(2).sizes(), (Shape{1, 3, 2}));
  EXPECT_EQ(a.squeeze(1).sizes(), (Shape{1, 3, 1, 2}));  // not size 1: unchanged
  EXPECT_EQ(a.squeeze(-4).sizes(), (Shape{3, 1, 2}));
  EXPECT_EQ(iota({1, 1}).squeeze().dim(), 0);
  EXPECT_EQ(scalar_tensor(1.0).squeeze(0).dim(), 0);
  EXPECT_EMBER_ERROR(a.squeeze(4), "squeeze", "dimension 4");

  Tensor b = iota({2, 3});
  EXPECT_EQ(b.unsqueeze(0).sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(b.unsqueeze(-1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(b.unsqueeze(1).strides(), (Shape{3, 3, 1}));
  EXPECT_EQ(b.unsqueeze(2).strides(), (Shape{3, 1, 1}));
  EXPECT_EQ(scalar_tensor(1.0).unsqueeze(0).sizes(), (Shape{1}));
  EXPECT_TRUE(b.unsqueeze(1).is_contiguous());
  expect_view_of(b.unsqueeze(1), b);
  EXPECT_EMBER_ERROR(b.unsqueeze(3), "unsqueeze", "dimension 3");
  EXPECT_EMBER_ERROR(b.unsqueeze(-4), "unsqueeze", "dimension -4");
}

TEST(ViewsTest, Flatten) {
  Tensor a = iota({2, 3, 4});
  EXPECT_EQ(a.flatten().sizes(), (Shape{24}));
  expect_view_of(a.flatten(), a);
  EXPECT_EQ(a.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(a.flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_EQ(a.flatten(-2, -1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(scalar_tensor(1.0).flatten().sizes(), (Shape{1}));
  Tensor f = a.transpose(0, 2).flatten();  // copies: order follows the transposed view
  EXPECT_EQ(values(f)[1], 12);
  EXPECT_EMBER_ERROR(a.flatten(2, 1), "flatten", "start_dim (2)", "end_dim (1)");
  EXPECT_EMBER_ERROR(a.flatten(0, 3), "flatten", "dimension 3");
}

TEST(ViewsTest, AsStrided) {
  Tensor a = iota({6});
  Tensor s = a.as_strided({2, 2}, {1, 2}, 1);
  expect_view_of(s, a);
  EXPECT_TENSOR(s, (Shape{2, 2}), ({1, 3, 2, 4}));
  // Overlapping windows (stride smaller than the window) are allowed for reading.
  EXPECT_TENSOR(a.as_strided({3, 3}, {1, 1}), (Shape{3, 3}), ({0, 1, 2, 1, 2, 3, 2, 3, 4}));
  // The default offset is the tensor's own.
  EXPECT_EQ(a.narrow(0, 2, 2).as_strided({2}, {1}).storage_offset(), 2);
  EXPECT_EQ(a.as_strided({0, 5}, {100, 100}, 6).numel(), 0);  // zero-size reaches nothing
  EXPECT_EMBER_ERROR(a.as_strided({2, 2}, {3, 1}, 2), "as_strided", "[2, 2]", "[3, 1]",
                     "offset 2", "6 elements");
  EXPECT_EMBER_ERROR(a.as_strided({7}, {1}), "as_strided", "[7]", "6 elements");
  EXPECT_EMBER_ERROR(a.as_strided({2}, {1, 1}), "as_strided", "differ in length");
  EXPECT_EMBER_ERROR(a.as_strided({2}, {-1}), "as_strided", "negative");
  EXPECT_EMBER_ERROR(a.as_strided({1}, {1}, 6), "as_strided", "offset 6");
}

TEST(ViewsTest, Contiguous) {
  Tensor a = iota({2, 3});
  EXPECT_TRUE(a.contiguous().is_same(a));  // already contiguous: the same tensor, no copy
  Tensor c = a.t().contiguous();
  EXPECT_FALSE(c.is_alias_of(a));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TENSOR(c, (Shape{3, 2}), ({0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(c.strides(), (Shape{2, 1}));
  // Size-1 dims may have any stride and still count as contiguous (PyTorch's rule).
  EXPECT_TRUE(iota({3, 1}).t().is_contiguous());
  EXPECT_FALSE(iota({3, 2}).slice(1, 0, 2, 2).squeeze().is_contiguous() &&
               iota({3, 2}).slice(1, 0, 2, 2).squeeze().strides()[0] != 2);
  Tensor e = iota({3}).expand({2, 3});
  EXPECT_FALSE(e.is_contiguous());
  EXPECT_TENSOR(e.contiguous(), (Shape{2, 3}), ({0, 1, 2, 0, 1, 2}));
}

TEST(ViewsTest, ViewsShareTheVersionCounter) {
  Tensor a = iota({4});
  Tensor v = a.narrow(0, 0, 2);
  const uint32_t before = a.version();
  v.mul_(2);
  EXPECT_EQ(a.version(), before + 1);
  EXPECT_TENSOR(a, (Shape{4}), ({0, 2, 2, 3}));
}

}  // namespace
}  // namespace ember
