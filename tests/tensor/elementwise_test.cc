// Elementwise ops on contiguous, strided (transposed/sliced), broadcast and zero-size inputs;
// PyTorch's type promotion; in-place forms; every error path with its message.
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::f32;
using testing::f64;
using testing::i32;
using testing::i64;
using testing::iota;
using testing::values;

TEST(ElementwiseTest, BinaryContiguous) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2}), b = f32({4, 3, 2, 1}, {2, 2});
  EXPECT_TENSOR(a + b, (Shape{2, 2}), ({5, 5, 5, 5}));
  EXPECT_TENSOR(a - b, (Shape{2, 2}), ({-3, -1, 1, 3}));
  EXPECT_TENSOR(a * b, (Shape{2, 2}), ({4, 6, 6, 4}));
  EXPECT_TENSOR(a / b, (Shape{2, 2}), ({0.25, 2.0 / 3, 1.5, 4}));
  EXPECT_TENSOR(add(a, b, 2), (Shape{2, 2}), ({9, 8, 7, 6}));
  EXPECT_TENSOR(sub(a, b, 0.5), (Shape{2, 2}), ({-1, 0.5, 2, 3.5}));
  EXPECT_TENSOR(pow(a, b), (Shape{2, 2}), ({1, 8, 9, 4}));
  EXPECT_TENSOR(maximum(a, b), (Shape{2, 2}), ({4, 3, 3, 4}));
  EXPECT_TENSOR(minimum(a, b), (Shape{2, 2}), ({1, 2, 2, 1}));
  EXPECT_TENSOR(-a, (Shape{2, 2}), ({-1, -2, -3, -4}));
}

TEST(ElementwiseTest, BinaryWithScalars) {
  Tensor a = f32({1, 2, 4});
  EXPECT_TENSOR(a + 1, (Shape{3}), ({2, 3, 5}));
  EXPECT_TENSOR(a - 1, (Shape{3}), ({0, 1, 3}));
  EXPECT_TENSOR(a * 0.5, (Shape{3}), ({0.5, 1, 2}));
  EXPECT_TENSOR(a / 2, (Shape{3}), ({0.5, 1, 2}));
  EXPECT_TENSOR(10 - a, (Shape{3}), ({9, 8, 6}));
  EXPECT_TENSOR(4 / a, (Shape{3}), ({4, 2, 1}));
  EXPECT_TENSOR(3 + a, (Shape{3}), ({4, 5, 7}));
  EXPECT_TENSOR(2 * a, (Shape{3}), ({2, 4, 8}));
  EXPECT_TENSOR(pow(a, 2), (Shape{3}), ({1, 4, 16}));
  EXPECT_TENSOR(pow(a, 0.5), (Shape{3}), ({1, std::sqrt(2.0), 2}));
  EXPECT_TENSOR(rsub(a, 1), (Shape{3}), ({0, -1, -3}));
  EXPECT_TENSOR(rdiv(a, 1), (Shape{3}), ({1, 0.5, 0.25}));
}

// Tensor.masked_fill: the mask broadcasts to the tensor, never the other way; the dtype is kept.
TEST(ElementwiseTest, MaskedFillBroadcastsTheMask) {
  Tensor a = iota({2, 3});
  Tensor mask = gt(f32({1, 0, 1}, {3}), 0.5);
  Tensor filled = masked_fill(a, mask, -1.5);
  EXPECT_EQ(filled.dtype(), a.dtype());
  EXPECT_EQ(values(filled), (std::vector<double>{-1.5, 1, -1.5, -1.5, 4, -1.5}));
  Tensor ints = masked_fill(i64({1, 2, 3}, {3}), mask, 7);
  EXPECT_EQ(ints.dtype(), kInt64);
  EXPECT_EQ(values(ints), (std::vector<double>{7, 2, 7}));
  EXPECT_EMBER_ERROR(masked_fill(a, f32({1, 0, 1}, {3}), 0), "masked_fill", "expected a bool mask");
  EXPECT_EMBER_ERROR(masked_fill(a.select(0, 0), gt(iota({2, 3}), 0.5), 0),
                     "masked_fill", "[2, 3]", "does not broadcast to the tensor's shape [3]");
}

TEST(ElementwiseTest, StridedInputs) {
  Tensor a = iota({3, 2}).t();           // [2, 3]: [[0, 2, 4], [1, 3, 5]]
  Tensor b = iota({2, 6}).slice(1, 0, 6, 2);  // [2, 3]: [[0, 2, 4], [6, 8, 10]]
  ASSERT_FALSE(a.is_contiguous());
  ASSERT_FALSE(b.is_contiguous());
  EXPECT_TENSOR(a + b, (Shape{2, 3}), ({0, 4, 8, 7, 11, 15}));
  EXPECT_TENSOR(b - a, (Shape{2, 3}), ({0, 0, 0, 5, 5, 5}));
  EXPECT_TENSOR(a * b, (Shape{2, 3}), ({0, 4, 16, 6, 24, 50}));
  EXPECT_TENSOR(a.gt(b.sub(3)), (Shape{2, 3}), ({1, 1, 1, 0, 0, 0}));
  EXPECT_TENSOR(a.exp().log(), (Shape{2, 3}), ({0, 2, 4, 1, 3, 5}));
  EXPECT_TENSOR(iota({4}).slice(0, 1, 4, 2).neg(), (Shape{2}), ({-1, -3}));
}

TEST(ElementwiseTest, Broadcasting) {
  Tensor a = iota({2, 1, 3});  // [[[0, 1, 2]], [[3, 4, 5]]]
  Tensor b = f32({10, 20}, {2, 1});
  Tensor c = a + b;  // [2, 2, 3]
  EXPECT_TENSOR(c, (Shape{2, 2, 3}), ({10, 11, 12, 20, 21, 22, 13, 14, 15, 23, 24, 25}));
  EXPECT_TENSOR(f32({1, 2, 3}) * f32({2}), (Shape{3}), ({2, 4, 6}));
  EXPECT_TENSOR(scalar_tensor(5.0) - f32({1, 2}), (Shape{2}), ({4, 3}));
  EXPECT_TENSOR(f32({1, 2}, {2, 1}).lt(f32({1.5, 0.5})), (Shape{2, 2}), ({1, 0, 0, 0}));
  // Expanded operands (stride 0) behave like materialised ones.
  Tensor e = f32({1, 2, 3}).expand({2, 3});
  EXPECT_TENSOR(e * iota({2, 3}), (Shape{2, 3}), ({0, 2, 6, 3, 8, 15}));
  EXPECT_EQ(broadcast_shapes({5, 1, 4}, {3, 1}), (Shape{5, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2}), (Shape{2}));
  EXPECT_EQ(broadcast_shapes({0}, {1}), (Shape{0}));
}

TEST(ElementwiseTest, ZeroSize) {
  Tensor z = empty({0, 3});
  EXPECT_EQ((z + f32({1, 2, 3})).sizes(), (Shape{0, 3}));
  EXPECT_EQ((z * 2).sizes(), (Shape{0, 3}));
  EXPECT_EQ(z.exp().sizes(), (Shape{0, 3}));
  EXPECT_EQ(z.eq(z).dtype(), kBool);
  EXPECT_EQ(where(empty({0}, kBool), empty({0}), f32({1})).sizes(), (Shape{0}));
  EXPECT_EQ(clamp(z, 0, 1).numel(), 0);
  EXPECT_EQ(z.add_(1).numel(), 0);
  EXPECT_EQ((empty({0}) + f32({1})).sizes(), (Shape{0}));
}

TEST(ElementwiseTest, BroadcastErrorsNameOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  EXPECT_EMBER_ERROR(a + b, "add", "[2, 3]", "[4]", "broadcast");
  EXPECT_EMBER_ERROR(a - b, "sub", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(a * b, "mul", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(a / b, "div", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(pow(a, b), "pow", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(maximum(a, b), "maximum", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(minimum(a, b), "minimum", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(a.eq(b), "eq", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(a.le(b), "le", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(where(zeros({2, 3}, kBool), a, b), "where", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(broadcast_shapes({0}, {2}, "myop"), "myop", "[0]", "[2]");
}

TEST(ElementwiseTest, TypePromotion) {
  Tensor i = i64({1, 2}), i3 = i32({1, 2});
  EXPECT_EQ((i + 2.5).dtype(), kFloat32);  // int tensor + float scalar -> default float
  EXPECT_TENSOR(i + 2.5, (Shape{2}), ({3.5, 4.5}));
  EXPECT_EQ((i3 + 5).dtype(), kInt32);  // an int scalar does not widen an int tensor
  EXPECT_EQ((i3 + i).dtype(), kInt64);
  EXPECT_EQ((i / i).dtype(), kFloat32);  // true division
  EXPECT_TENSOR(i64({1, 7}) / i64({2, 2}), (Shape{2}), ({0.5, 3.5}));
  EXPECT_TENSOR(i64({3}) / 2, (Shape{1}), ({1.5}));
  EXPECT_EQ((2 / i).dtype(), kFloat32);
  // 0-dim tensors only win when their category is higher.
  EXPECT_EQ((i3 + scalar_tensor(1, kInt64)).dtype(), kInt32);
  EXPECT_EQ((i3 + scalar_tensor(1.5, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((zeros({2}, kFloat16) + scalar_tensor(1.0, kFloat64)).dtype(), kFloat16);
  EXPECT_EQ((scalar_tensor(1.0, kFloat64) + scalar_tensor(1.0, kFloat16)).dtype(), kFloat64);
  EXPECT_EQ((zeros({2}, kFloat16) + zeros({2}, kBFloat16)).dtype(), kFloat32);
  EXPECT_EQ((zeros({2}, kFloat16) * 2.5).dtype(), kFloat16);
  EXPECT_EQ((zeros({2}, kUInt8) + zeros({2}, kInt32)).dtype(), kInt32);
  EXPECT_EQ((zeros({2}, kBool) + 1).dtype(), kInt64);
  EXPECT_EQ((zeros({2}, kBool) + zeros({2}, kBool)).dtype(), kBool);
  EXPECT_EQ((i3 * true).dtype(), kInt32);
  EXPECT_EQ(i.lt(2.5).dtype(), kBool);
  EXPECT_TENSOR(i.lt(1.5), (Shape{2}), ({1, 0}));  // compared as floats, not truncated to 1
  EXPECT_EQ(exp(i).dtype(), kFloat32);
  EXPECT_EQ(sqrt(zeros({1}, kBool)).dtype(), kFloat32);
  EXPECT_EQ(abs(i3).dtype(), kInt32);
  EXPECT_EQ(where(zeros({2}, kBool), i3, f64({1, 2})).dtype(), kFloat64);
}

TEST(ElementwiseTest, IntegerArithmeticWrapsLikePyTorch) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  EXPECT_TENSOR(i32({big}) + 1, (Shape{1}), ({-2147483648.0}));
  EXPECT_TENSOR(i32({-big - 1}) - 1, (Shape{1}), ({2147483647.0}));
  EXPECT_TENSOR(i32({65536}) * i32({65536}), (Shape{1}), ({0}));
  EXPECT_TENSOR(neg(i32({-big - 1})), (Shape{1}), ({-2147483648.0}));
  EXPECT_TENSOR(zeros({1}, kUInt8) - 1, (Shape{1}), ({255}));
  EXPECT_TENSOR(pow(i64({3}), 41), (Shape{1}), ({-420491770248316829.0}));  // torch: 3 ** 41
}

TEST(ElementwiseTest, IntegerPowAndAlphaRules) {
  EXPECT_TENSOR(pow(i64({2, 3, -2}), i64({3, 0, 3})), (Shape{3}), ({8, 1, -8}));
  EXPECT_EQ(pow(i64({2}), 2).dtype(), kInt64);
  EXPECT_EQ(pow(i64({2}), 0.5).dtype(), kFloat32);
  EXPECT_TENSOR(add(i64({1}), i64({2}), 3), (Shape{1}), ({7}));
  EXPECT_EMBER_ERROR(add(i64({1}), i64({2}), 0.5), "add", "alpha", "0.5");
  EXPECT_EMBER_ERROR(sub(zeros({1}, kBool), zeros({1}, kBool)), "sub", "bool");
}

TEST(ElementwiseTest, Comparisons) {
  Tensor a = f32({1, 2, 3}), b = f32({3, 2, 1});
  EXPECT_TENSOR(a.eq(b), (Shape{3}), ({0, 1, 0}));
  EXPECT_TENSOR(a.ne(b), (Shape{3}), ({1, 0, 1}));
  EXPECT_TENSOR(a.lt(b), (Shape{3}), ({1, 0, 0}));
  EXPECT_TENSOR(a.le(b), (Shape{3}), ({1, 1, 0}));
  EXPECT_TENSOR(a.gt(b), (Shape{3}), ({0, 0, 1}));
  EXPECT_TENSOR(a.ge(b), (Shape{3}), ({0, 1, 1}));
  EXPECT_TENSOR(a.eq(2), (Shape{3}), ({0, 1, 0}));
  EXPECT_TENSOR(a.ne(2), (Shape{3}), ({1, 0, 1}));
  EXPECT_TENSOR(a.lt(2), (Shape{3}), ({1, 0, 0}));
  EXPECT_TENSOR(a.le(2), (Shape{3}), ({1, 1, 0}));
  EXPECT_TENSOR(a.gt(2), (Shape{3}), ({0, 0, 1}));
  EXPECT_TENSOR(a.ge(2), (Shape{3}), ({0, 1, 1}));
  EXPECT_EQ(a.eq(b).dtype(), kBool);
  EXPECT_TENSOR(f32({NAN}).eq(f32({NAN})), (Shape{1}), ({0}));
  EXPECT_TENSOR(f32({NAN}).ne(f32({NAN})), (Shape{1}), ({1}));
  EXPECT_TENSOR(i64({1, 2}).eq(f32({1.0f, 2.5f})), (Shape{2}), ({1, 0}));
}

TEST(ElementwiseTest, Unary) {
  Tensor a = f64({-1, 0, 0.5, 2});
  EXPECT_TENSOR(neg(a), (Shape{4}), ({1, 0, -0.5, -2}));
  EXPECT_TENSOR(abs(a), (Shape{4}), ({1, 0, 0.5, 2}));
  EXPECT_TENSOR(relu(a), (Shape{4}), ({0, 0, 0.5, 2}));
  EXPECT_TENSOR(sign(a), (Shape{4}), ({-1, 0, 1, 1}));
  EXPECT_TENSOR(exp(a), (Shape{4}), ({std::exp(-1.0), 1, std::exp(0.5), std::exp(2.0)}));
  EXPECT_TENSOR(sigmoid(a), (Shape{4}), ({1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-0.5)),
                                          1 / (1 + std::exp(-2.0))}));
  EXPECT_TENSOR(tanh(a), (Shape{4}), ({std::tanh(-1.0), 0, std::tanh(0.5), std::tanh(2.0)}));
  Tensor p = f64({0.25, 1, 4});
  EXPECT_TENSOR(log(p), (Shape{3}), ({std::log(0.25), 0, std::log(4.0)}));
  EXPECT_TENSOR(sqrt(p), (Shape{3}), ({0.5, 1, 2}));
  EXPECT_TENSOR(rsqrt(p), (Shape{3}), ({2, 1, 0.5}));
  EXPECT_TENSOR(log(f32({0, -1})), (Shape{2}), ({-INFINITY, NAN}));
  EXPECT_TENSOR(exp(i32({0, 1})), (Shape{2}), ({1, std::exp(1.0)}));
  EXPECT_TENSOR(abs(i32({-3, 3})), (Shape{2}), ({3, 3}));
  EXPECT_TENSOR(relu(i64({-3, 3})), (Shape{2}), ({0, 3}));
  EXPECT_TENSOR(sign(zeros({2}, kUInt8) + 3), (Shape{2}), ({1, 1}));
  // NaN: relu and abs keep it; sign(NaN) is 0 in PyTorch.
  EXPECT_TENSOR(relu(f32({NAN})), (Shape{1}), ({NAN}));
  EXPECT_TENSOR(abs(f32({NAN})), (Shape{1}), ({NAN}));
  EXPECT_TENSOR(sign(f32({NAN})), (Shape{1}), ({0}));
  // Reduced precision computes in float and rounds once.
  EXPECT_TENSOR(exp(zeros({1}, kBFloat16)), (Shape{1}), ({1}));
  EXPECT_EQ(sigmoid(zeros({1}, kFloat16)).dtype(), kFloat16);
  EXPECT_EMBER_ERROR(neg(zeros({1}, kBool)), "neg", "bool");
  EXPECT_EMBER_ERROR(abs(zeros({1}, kBool)), "abs", "bool");
  EXPECT_EMBER_ERROR(relu(zeros({1}, kBool)), "relu", "bool");
}

// Expected values are torch.ops.aten.threshold_backward's (PyTorch 1.13) on the same operands.
TEST(ElementwiseTest, ThresholdBackward) {
  const Tensor g = f32({1, 2, 3, 4, 5, INFINITY}), x = f32({-1, 0, 0.5, NAN, 2, 0});
  // A NaN in self passes its gradient on; an infinite gradient under a zero self gives 0.
  EXPECT_TENSOR(threshold_backward(g, x, 0), (Shape{6}), ({0, 0, 3, 4, 5, 0}));
  EXPECT_TENSOR(threshold_backward(g, x, 0.5), (Shape{6}), ({0, 0, 0, 4, 5, 0}));
  EXPECT_EQ(threshold_backward(g.to(kFloat64), x, 0).dtype(), kFloat64);
  EXPECT_EQ(threshold_backward(g, x.to(kFloat64), 0).dtype(), kFloat64);
  EXPECT_TENSOR(threshold_backward(i64({3, 4, 5}), i64({-1, 0, 1}), 0), (Shape{3}), ({0, 0, 5}));
  EXPECT_TENSOR(threshold_backward(f32({1, 2}, {2, 1}), f32({-1, 1, 2}), 0), (Shape{2, 3}),
                ({0, 1, 1, 0, 2, 2}));
  // Long enough for every vector width and a tail, and strided: the same as the two-pass form.
  Generator gen(7);
  const Tensor grad = randn({5, 37}, &gen), self = randn({37, 5}, &gen).t();
  EXPECT_TRUE(equal(threshold_backward(grad, self, 0.25),
                    where(le(self, 0.25), zeros_like(grad), grad)));
  EXPECT_EMBER_ERROR(threshold_backward(zeros({1}, kBool), zeros({1}, kBool), 0),
                     "threshold_backward", "bool");
  EXPECT_EMBER_ERROR(threshold_backward(f32({1, 2}), f32({1, 2, 3}), 0), "threshold_backward",
                     "[2]", "[3]");
}

TEST(ElementwiseTest, Clamp) {
  Tensor a = f32({-2, 0.5, 3, NAN});
  EXPECT_TENSOR(a.clamp(-1, 1), (Shape{4}), ({-1, 0.5, 1, NAN}));
  EXPECT_TENSOR(a.clamp_min(0), (Shape{4}), ({0, 0.5, 3, NAN}));
  EXPECT_TENSOR(a.clamp_max(0), (Shape{4}), ({-2, 0, 0, NAN}));
  EXPECT_TENSOR(a.clamp(2, 1), (Shape{4}), ({1, 1, 1, NAN}));  // min > max: everything is max
  EXPECT_TENSOR(i64({-5, 5}).clamp(-1, 1), (Shape{2}), ({-1, 1}));
  EXPECT_EQ(i64({1}).clamp(0.5, 2).dtype(), kFloat32);
  EXPECT_TENSOR(iota({2, 2}).t().clamp(1, 2), (Shape{2, 2}), ({1, 2, 1, 2}));
  EXPECT_EMBER_ERROR(clamp(a, std::nullopt, std::nullopt), "clamp", "at least one");
  EXPECT_EQ(zeros({1}, kBool).clamp(0, 1).dtype(), kInt64);  // int bounds lift bool to int64
  EXPECT_EMBER_ERROR(zeros({1}, kBool).clamp(false, true), "clamp", "bool");
}

TEST(ElementwiseTest, MaximumMinimumPropagateNaN) {
  Tensor a = f32({NAN, 1, 2}), b = f32({0, NAN, 1});
  EXPECT_TENSOR(maximum(a, b), (Shape{3}), ({NAN, NAN, 2}));
  EXPECT_TENSOR(minimum(a, b), (Shape{3}), ({NAN, NAN, 1}));
  EXPECT_EQ(maximum(i32({1}), i64({2})).dtype(), kInt64);
}

TEST(ElementwiseTest, Where) {
  Tensor c = testing::b8({true, false, true});
  EXPECT_TENSOR(where(c, f32({1, 2, 3}), f32({-1, -2, -3})), (Shape{3}), ({1, -2, 3}));
  EXPECT_TENSOR(where(c, f32({1}), scalar_tensor(0.0)), (Shape{3}), ({1, 0, 1}));
  Tensor c2 = testing::b8({true, false}, {2, 1});
  EXPECT_TENSOR(where(c2, iota({3}), iota({2, 3}).t().t().neg()), (Shape{2, 3}),
                ({0, 1, 2, -3, -4, -5}));
  EXPECT_EMBER_ERROR(where(zeros({3}), f32({1}), f32({2})), "where", "bool", "float32[3]");
}

// Every dense / broadcast-scalar combination of where's value operands (each a loop of its own in
// the CPU kernel), and a transposed one, against the element-by-element definition; large enough
// to be split when threads are set (tests/tensor/parallel_test.cc checks the bits do not change).
TEST(ElementwiseTest, WhereOverDenseAndScalarOperands) {
  Generator gen(3);
  const Shape shape{7, 100003};
  Tensor cond = gt(randn(shape, &gen), 0.0);
  Tensor a = randn(shape, &gen), b = randn(shape, &gen);
  Tensor s1 = scalar_tensor(1.5), s2 = scalar_tensor(-2.5);
  Tensor bt = randn({shape[1], shape[0]}, &gen).t();
  for (const auto& [x, y] : std::vector<std::pair<Tensor, Tensor>>{{a, b}, {a, s2}, {s1, b}, {s1, s2}, {a, bt}}) {
    Tensor out = where(cond, x, y);
    Tensor xe = x.expand(shape).contiguous(), ye = y.expand(shape).contiguous(), oc = out.contiguous();
    const bool* c = cond.data_ptr<bool>();
    const float *xp = xe.data_ptr<float>(), *yp = ye.data_ptr<float>(), *o = oc.data_ptr<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < out.numel(); ++i) wrong += o[i] != (c[i] ? xp[i] : yp[i]);
    EXPECT_EQ(wrong, 0) << x.describe() << " / " << y.describe();
  }
}

TEST(ElementwiseTest, InPlace) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(a.add_(f32({10, 20}), 2).is_same(a));
  EXPECT_TENSOR(a, (Shape{2, 2}), ({21, 42, 23, 44}));
  a.sub_(f32({1}), 3);
  EXPECT_TENSOR(a, (Shape{2, 2}), ({18, 39, 20, 41}));
  a.mul_(f32({2}, {1, 1}));
  a.div_(f32({4, 2}, {2, 1}));
  EXPECT_TENSOR(a, (Shape{2, 2}), ({9, 19.5, 20, 41}));
  a.add_(1).mul_(2).div_(4);
  EXPECT_TENSOR(a, (Shape{2, 2}), ({5, 10.25, 10.5, 21}));
  // Into a strided view: writes through to the base.
  Tensor base = zeros({3, 3});
  base.t().select(0, 1).add_(f32({1, 2, 3}));
  EXPECT_TENSOR(base, (Shape{3, 3}), ({0, 1, 0, 0, 2, 0, 0, 3, 0}));
  // A float tensor accepts int and double operands; the result keeps its dtype.
  Tensor h = zeros({2}, kFloat16);
  h.add_(f64({1.5, 2.5}));
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_TENSOR(h, (Shape{2}), ({1.5, 2.5}));
  Tensor i = i32({1, 2});
  i.add_(i64({5, 5})).mul_(2);
  EXPECT_TENSOR(i, (Shape{2}), ({12, 14}));
  // Aliasing: the same tensor on both sides, and an operand that overlaps the output.
  Tensor s = f32({1, 2});
  s.add_(s);
  EXPECT_TENSOR(s, (Shape{2}), ({2, 4}));
  Tensor m = iota({2, 2});
  m.add_(m.t());
  EXPECT_TENSOR(m, (Shape{2, 2}), ({0, 3, 3, 6}));
  Tensor r = iota({4});
  r.narrow(0, 1, 3).add_(r.narrow(0, 0, 3));
  EXPECT_TENSOR(r, (Shape{4}), ({0, 1, 3, 5}));
}

TEST(ElementwiseTest, InPlaceErrors) {
  Tensor a = zeros({3});
  EXPECT_EMBER_ERROR(a.add_(zeros({2, 3})), "add_", "[3]", "[2, 3]");
  EXPECT_EMBER_ERROR(a.mul_(zeros({4})), "mul", "[3]", "[4]");
  Tensor i = zeros({2}, kInt64);
  EXPECT_EMBER_ERROR(i.div_(i), "div_", "float32", "int64");
  EXPECT_EMBER_ERROR(i.add_(1.5), "add_", "float32", "int64");
  EXPECT_EMBER_ERROR(i.mul_(zeros({2})), "mul_", "float32", "int64");
  EXPECT_EMBER_ERROR(zeros({2}, kBool).add_(zeros({2}, kInt32)), "add_", "int32", "bool");
  EXPECT_EMBER_ERROR(i.sub_(i, 0.5), "sub", "alpha");
}

// mul_out, PyTorch's mul(out=) (its refusal of operands that require grad is in
// tests/autograd/gradcheck_test.cc): one pass from a strided source into a destination view (DDP scales
// a gradient into its bucket with it), the same values as mul; a result of another dtype is cast.
TEST(ElementwiseTest, MulOut) {
  Tensor src = iota({2, 3}).t();  // [3, 2], strided
  Tensor base = zeros({8});
  Tensor out = base.narrow(0, 1, 6).view({3, 2});
  EXPECT_TRUE(mul_out(out, src, 0.5).is_same(out));
  EXPECT_TRUE(equal(out, mul(src, 0.5)));
  EXPECT_TENSOR(base, (Shape{8}), ({0, 0, 1.5, 0.5, 2, 1, 2.5, 0}));
  Tensor d = zeros({3, 2}, kFloat64);
  mul_out(d, src, 1.0 / 3.0);  // float32 product, cast to float64
  EXPECT_TRUE(equal(d, mul(src, 1.0 / 3.0).to(kFloat64)));
  Tensor i = i64({1, 2, 3});
  mul_out(i, i, 2);  // in place through the same tensor
  EXPECT_TENSOR(i, (Shape{3}), ({2, 4, 6}));
}

TEST(ElementwiseTest, MulOutErrors) {
  Tensor out = zeros({3});
  EXPECT_EMBER_ERROR(mul_out(out, zeros({2, 3}), 2.0), "mul_out", "[3]", "[2, 3]");
  EXPECT_EMBER_ERROR(mul_out(zeros({2}, kInt64), zeros({2}), 2.0), "mul_out", "float32", "int64");
  Tensor r = iota({4});
  EXPECT_EMBER_ERROR(mul_out(r.narrow(0, 1, 3), r.narrow(0, 0, 3), 2.0), "mul_out", "overlap");
}

TEST(ElementwiseTest, CopyFillZero) {
  Tensor dst = zeros({2, 3}, kInt32);
  dst.copy_(f32({1.9f, -2.9f, 3}));  // broadcast rows, convert (truncate)
  EXPECT_TENSOR(dst, (Shape{2, 3}), ({1, -2, 3, 1, -2, 3}));
  Tensor t = zeros({3, 2});
  t.t().copy_(iota({2, 3}));  // into a transposed view
  EXPECT_TENSOR(t, (Shape{3, 2}), ({0, 3, 1, 4, 2, 5}));
  Tensor ov = iota({5});
  ov.narrow(0, 1, 4).copy_(ov.narrow(0, 0, 4));  // overlapping source: copied as if cloned first
  EXPECT_TENSOR(ov, (Shape{5}), ({0, 0, 1, 2, 3}));
  Tensor f = zeros({2, 2});
  f.select(1, 0).fill_(7);
  EXPECT_TENSOR(f, (Shape{2, 2}), ({7, 0, 7, 0}));
  f.zero_();
  EXPECT_TENSOR(f, (Shape{2, 2}), ({0, 0, 0, 0}));
  EXPECT_TENSOR(zeros({2}, kInt32).fill_(2.7), (Shape{2}), ({2, 2}));
  EXPECT_TENSOR(zeros({1}, kBool).fill_(0.5), (Shape{1}), ({1}));
  EXPECT_EQ(empty({0}).fill_(1).numel(), 0);
  EXPECT_EMBER_ERROR(zeros({2, 3}).copy_(zeros({4})), "copy_", "float32[4]", "float32[2, 3]");
  EXPECT_EMBER_ERROR(zeros({2}).copy_(zeros({2, 2})), "copy_", "[2, 2]", "[2]");
  EXPECT_EMBER_ERROR(Tensor().fill_(1), "fill_", "undefined");
}

}  // namespace
}  // namespace ember
