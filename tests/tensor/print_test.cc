// Printing: PyTorch's layout (shared float format per tensor, integer/fixed/scientific modes,
// padding, nested brackets, summarisation of large tensors) through operator<< and fmt::format.
#include <sstream>

#include "tests/tensor/test_util.h"

namespace ember {
namespace {

using testing::f32;
using testing::i64;
using testing::iota;

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST(PrintTest, FloatModes) {
  EXPECT_EQ(printed(f32({1, 2})), "tensor([1., 2.])");
  EXPECT_EQ(printed(f32({1.5f, 2})), "tensor([1.5000, 2.0000])");
  EXPECT_EQ(printed(f32({-1, 2})), "tensor([-1.,  2.])");
  EXPECT_EQ(printed(scalar_tensor(1.5)), "tensor(1.5000)");
  EXPECT_EQ(printed(f32({1e-5f, 1.0f}, {1, 2})), "tensor([[1.0000e-05, 1.0000e+00]])");
  EXPECT_EQ(printed(f32({1e9f, 1.0f})), "tensor([1.0000e+09, 1.0000e+00])");
  EXPECT_EQ(printed(scalar_tensor(1e-5)), "tensor(1.0000e-05)");
  // PyTorch's rule: a ratio above 1000 between the largest and smallest non-zero |value| goes
  // scientific, for integer-valued tensors too.
  EXPECT_EQ(printed(f32({0.001f, 2.0f})), "tensor([1.0000e-03, 2.0000e+00])");
  EXPECT_EQ(printed(f32({1, 10000})), "tensor([1.0000e+00, 1.0000e+04])");
  EXPECT_EQ(printed(f32({1.5f, 2000})), "tensor([1.5000e+00, 2.0000e+03])");
  EXPECT_EQ(printed(f32({0, 1000})), "tensor([   0., 1000.])");  // zeros do not count
  EXPECT_EQ(printed(f32({1, NAN, INFINITY})), "tensor([1., nan, inf])");
  EXPECT_EQ(printed(f32({-INFINITY, 0.5f})), "tensor([  -inf, 0.5000])");
}

TEST(PrintTest, DtypesAndDefaults) {
  EXPECT_EQ(printed(i64({-1, 100})), "tensor([ -1, 100])");
  EXPECT_EQ(printed(testing::b8({true, false})), "tensor([ True, False])");
  EXPECT_EQ(printed(f32({1, 2}).to(kFloat64)), "tensor([1., 2.], dtype=float64)");
  EXPECT_EQ(printed(f32({0.5f}).to(kFloat16)), "tensor([0.5000], dtype=float16)");
  EXPECT_EQ(printed(f32({3}).to(kBFloat16)), "tensor([3.], dtype=bfloat16)");
  EXPECT_EQ(printed(i64({7}).to(kInt32)), "tensor([7], dtype=int32)");
  EXPECT_EQ(printed(i64({255}).to(kUInt8)), "tensor([255], dtype=uint8)");
  EXPECT_EQ(printed(scalar_tensor(3, kInt64)), "tensor(3)");
  EXPECT_EQ(printed(Tensor()), "tensor(undefined)");
}

TEST(PrintTest, NestedLayout) {
  EXPECT_EQ(printed(iota({2, 2})), "tensor([[0., 1.],\n        [2., 3.]])");
  EXPECT_EQ(printed(iota({2, 1, 2}, kInt64)), "tensor([[[0, 1]],\n\n        [[2, 3]]])");
  EXPECT_EQ(printed(iota({2, 2}).t()), "tensor([[0., 2.],\n        [1., 3.]])");  // strided
  EXPECT_EQ(printed(iota({2, 3}).mul(0.5).sub(1)),
            "tensor([[-1.0000, -0.5000,  0.0000],\n        [ 0.5000,  1.0000,  1.5000]])");
}

TEST(PrintTest, Empty) {
  EXPECT_EQ(printed(empty({0})), "tensor([])");
  EXPECT_EQ(printed(empty({0, 3})), "tensor([], size=[0, 3])");
  EXPECT_EQ(printed(empty({0}, kInt32)), "tensor([], dtype=int32)");
}

TEST(PrintTest, SummarisesLargeTensors) {
  EXPECT_EQ(printed(arange(2000, kInt64)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(printed(arange(2000).view({1000, 2})),
            "tensor([[0.0000e+00, 1.0000e+00],\n"
            "        [2.0000e+00, 3.0000e+00],\n"
            "        [4.0000e+00, 5.0000e+00],\n"
            "        ...,\n"
            "        [1.9940e+03, 1.9950e+03],\n"
            "        [1.9960e+03, 1.9970e+03],\n"
            "        [1.9980e+03, 1.9990e+03]])");
  EXPECT_EQ(printed(zeros({1000})).find("..."), std::string::npos);  // at the threshold: all
}

TEST(PrintTest, FmtFormat) {
  EXPECT_EQ(fmt::format("{}", f32({1, 2})), "tensor([1., 2.])");
  EXPECT_EQ(fmt::format("x={}", iota({2, 2}).t()), "x=tensor([[0., 2.],\n        [1., 3.]])");
  EXPECT_EQ(fmt::format("{} {}", kBFloat16, kCPU), "bfloat16 cpu");
  EXPECT_EQ(fmt::format("{}", Device(DeviceType::kCUDA, 1)), "cuda:1");
  EXPECT_EQ(iota({2}).str(), "tensor([0., 1.])");
}

}  // namespace
}  // namespace ember
