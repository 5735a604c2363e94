// Tensor metadata: sizes/strides/offset/dtype/device, item, typed data_ptr, aliasing, describe.
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::f32;
using testing::iota;

TEST(TensorTest, Metadata) {
  Tensor t = zeros({2, 3, 4}, kFloat64);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.stride(-2), 4);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.scalar_type(), kFloat64);
  EXPECT_EQ(t.element_size(), 8u);
  EXPECT_EQ(t.nbytes(), 192u);
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_TRUE(t.is_cpu());
  EXPECT_FALSE(t.is_cuda());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.is_floating_point());
  EXPECT_FALSE(zeros({2}, kInt32).is_floating_point());
}

TEST(TensorTest, ZeroDimAndZeroSize) {
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.sizes().empty());
  EXPECT_EQ(s.item<double>(), 2.5);
  Tensor z = empty({3, 0, 2});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.strides(), (Shape{2, 2, 1}));  // zero-size dims count as 1 in strides (PyTorch)
}

TEST(TensorTest, SizeOutOfRangeThrows) {
  Tensor t = zeros({2, 3});
  EXPECT_EMBER_ERROR(t.size(2), "size", "dimension 2", "2 dims");
  EXPECT_EMBER_ERROR(t.stride(-3), "stride", "dimension -3");
  // A 0-dim tensor has no dimension to ask about.
  EXPECT_EMBER_ERROR(scalar_tensor(1.0).size(0), "size", "0-dim");
  EXPECT_EMBER_ERROR(scalar_tensor(1.0).stride(-1), "stride", "0-dim");
}

TEST(TensorTest, UndefinedTensorThrows) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_EQ(u.describe(), "undefined tensor");
  EXPECT_EMBER_ERROR(u.sizes(), "undefined tensor");
  EXPECT_EMBER_ERROR(u.numel(), "undefined tensor");
  EXPECT_EMBER_ERROR(add(u, zeros({1})), "add", "undefined");
  EXPECT_EMBER_ERROR(zeros({1}).copy_(u), "copy_", "undefined");
}

TEST(TensorTest, ItemConvertsAndChecksNumel) {
  EXPECT_EQ(scalar_tensor(3, kInt64).item<int64_t>(), 3);
  EXPECT_EQ(f32({1.75f}).item<float>(), 1.75f);
  EXPECT_EQ(f32({1.75f}).item<int>(), 1);  // truncation, like static_cast
  EXPECT_TRUE(full({1, 1}, true, kBool).item<bool>());
  EXPECT_EQ(full({}, 200, kUInt8).item<int>(), 200);
  EXPECT_EQ(full({}, 0.5, kFloat16).item<double>(), 0.5);
  EXPECT_TRUE(scalar_tensor(1.5).item().is_floating_point());
  EXPECT_TRUE(scalar_tensor(2, kInt32).item().is_integral());
  EXPECT_TRUE(scalar_tensor(true, kBool).item().is_bool());
  // item of a strided one-element view reads the right element.
  EXPECT_EQ(iota({2, 3}).t()[2][1].item<float>(), 5);
  EXPECT_EMBER_ERROR(zeros({2}).item(), "item", "one element", "float32[2]");
  EXPECT_EMBER_ERROR(zeros({0}).item<float>(), "item", "float32[0]");
}

TEST(TensorTest, TypedDataPtrChecksDtype) {
  Tensor t = zeros({3}, kInt32);
  EXPECT_EQ(t.data_ptr<int32_t>(), t.data_ptr());
  EXPECT_EMBER_ERROR(t.data_ptr<float>(), "data_ptr<float32>", "int32");
  EXPECT_EMBER_ERROR(zeros({1}, kFloat16).data_ptr<BFloat16>(), "data_ptr<bfloat16>", "float16");
  // A view's pointer starts at its offset.
  Tensor v = iota({6}).narrow(0, 2, 3);
  EXPECT_EQ(v.data_ptr<float>(), v.storage().data() ? static_cast<float*>(v.storage().data()) + 2
                                                    : nullptr);
  EXPECT_EQ(*v.data_ptr<float>(), 2.0f);
}

TEST(TensorTest, IsAliasOfAndIsSame) {
  Tensor a = zeros({4});
  Tensor b = a;
  Tensor v = a.view({2, 2});
  Tensor c = a.clone();
  EXPECT_TRUE(a.is_same(b));
  EXPECT_FALSE(a.is_same(v));
  EXPECT_TRUE(a.is_alias_of(v));
  EXPECT_TRUE(v.is_alias_of(a));
  EXPECT_FALSE(a.is_alias_of(c));
  EXPECT_FALSE(a.is_alias_of(Tensor()));
  EXPECT_FALSE(Tensor().is_alias_of(a));
}

TEST(TensorTest, VersionCounterSharedByViewsAndBumpedInPlace) {
  Tensor a = zeros({4});
  Tensor v = a.view({2, 2});
  const uint32_t v0 = a.version();
  v.add_(1);
  EXPECT_GT(a.version(), v0);
  EXPECT_EQ(a.version(), v.version());
  const uint32_t v1 = a.version();
  a.fill_(3);
  a.zero_();
  EXPECT_GE(v.version(), v1 + 2);
  // A clone has its own counter: bumping it leaves the original alone.
  Tensor c = a.clone();
  const uint32_t va = a.version();
  c.add_(1);
  EXPECT_EQ(a.version(), va);
}

TEST(TensorTest, DescribeNamesDtypeShapeDevice) {
  EXPECT_EQ(zeros({2, 3}).describe(), "float32[2, 3] on cpu");
  EXPECT_EQ(zeros({}, kBFloat16).describe(), "bfloat16[] on cpu");
  EXPECT_EQ(zeros({0}, kUInt8).describe(), "uint8[0] on cpu");
  EXPECT_EQ(zeros({2, 3}).shape_str(), "[2, 3]");
  EXPECT_EQ(shape_to_string({}), "[]");
}

TEST(TensorTest, DtypeNamesAndSizes) {
  const char* names[] = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"};
  const size_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const ScalarType t = testing::all_dtypes()[i];
    EXPECT_STREQ(dtype_name(t), names[i]);
    EXPECT_EQ(element_size(t), sizes[i]);
    EXPECT_EQ(zeros({3}, t).nbytes(), 3 * sizes[i]);
  }
}

TEST(TensorTest, DeviceParsing) {
  EXPECT_EQ(Device("cpu"), kCPU);
  EXPECT_EQ(Device("cuda:1").index, 1);
  EXPECT_TRUE(Device("cuda").is_cuda());
  EXPECT_EQ(Device("cuda:2").str(), "cuda:2");
  EXPECT_EQ(kCPU.str(), "cpu");
  EXPECT_NE(Device("cuda:0"), Device("cuda:1"));
  EXPECT_EMBER_ERROR(Device("tpu"), "Device", "tpu");
  EXPECT_EMBER_ERROR(Device("cuda:x"), "Device", "cuda:x");
  EXPECT_EMBER_ERROR(Device("cuda:1x"), "Device", "cuda:1x");
}

}  // namespace
}  // namespace ember
