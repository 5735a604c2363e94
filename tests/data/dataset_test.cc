// TensorDataset and the default Dataset::get_batch: values, views, and index/shape errors.
#include "data/tensor_dataset.h"

#include <gtest/gtest.h>

#include "data_test_util.h"
#include "tensor/factories.h"

namespace ember::data {
namespace {

// 5 uint8 "images" [5, 2, 3, 3]; element k of image i is i * 18 + k.
TensorDataset make_dataset() {
  Tensor data = arange(0, 5 * 18, 1, kUInt8).view({5, 2, 3, 3});
  Tensor targets = from_vector<int64_t>({10, 11, 12, 13, 14});
  return TensorDataset(data, targets);
}

TEST(TensorDataset, GetReturnsViewsOfTheSample) {
  const TensorDataset ds = make_dataset();
  EXPECT_EQ(ds.size(), 5);
  const Example e = ds.get(3);
  EXPECT_EQ(e.data.sizes(), (Shape{2, 3, 3}));
  EXPECT_EQ(e.target.item<int64_t>(), 13);
  EXPECT_EQ(e.data.data_ptr<uint8_t>()[0], 54);
  EXPECT_TRUE(e.data.is_alias_of(ds.data()));
}

TEST(TensorDataset, GetBatchGathersSamplesInOrder) {
  const TensorDataset ds = make_dataset();
  const Example b = ds.get_batch({4, 0, 4, 2});
  EXPECT_EQ(b.data.sizes(), (Shape{4, 2, 3, 3}));
  EXPECT_EQ(b.data.dtype(), kUInt8);
  EXPECT_FALSE(b.data.is_alias_of(ds.data()));
  const uint8_t* p = b.data.data_ptr<uint8_t>();
  const std::vector<int64_t> picked{4, 0, 4, 2};
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 18; ++k) EXPECT_EQ(p[r * 18 + k], picked[r] * 18 + k);
    EXPECT_EQ(b.target.data_ptr<int64_t>()[r], 10 + picked[r]);
  }
}

TEST(TensorDataset, NonContiguousDataIsCopiedOnce) {
  // A transposed [3, 2] float tensor: samples must come out in logical order.
  Tensor data = arange(0, 6, 1, kFloat32).view({2, 3}).t();
  TensorDataset ds(data, from_vector<int64_t>({0, 1, 2}));
  const Example b = ds.get_batch({2, 0});
  const float* p = b.data.data_ptr<float>();
  EXPECT_EQ(std::vector<float>(p, p + 4), (std::vector<float>{2, 5, 0, 3}));
}

TEST(TensorDatasetErrors, IndexAndShapeChecks) {
  const TensorDataset ds = make_dataset();
  EXPECT_EMBER_ERROR(ds.get(5), "TensorDataset::get", "index 5", "size 5");
  EXPECT_EMBER_ERROR(ds.get_batch({0, -1}), "TensorDataset::get_batch", "index -1", "size 5");
  EXPECT_EMBER_ERROR(ds.get_batch({}), "get_batch", "empty");
  EXPECT_EMBER_ERROR(TensorDataset(zeros({4, 2}), from_vector<int64_t>({0, 1, 2})), "TensorDataset",
                     "same first dimension", "[4, 2]", "[3]");
  EXPECT_EMBER_ERROR(TensorDataset(zeros({3, 2}), zeros({3})), "TensorDataset", "int64", "float32");
}

// A dataset that only implements get(): exercises the default get_batch.
class SquaresDataset : public Dataset {
 public:
  int64_t size() const override { return 6; }
  Example get(int64_t i) const override {
    if (i == 5) return {zeros({3}), scalar_tensor(int64_t{0}, kInt64)};  // wrong shape on purpose
    return {full({2}, static_cast<double>(i * i)), scalar_tensor(i, kInt64)};
  }
};

TEST(Dataset, DefaultGetBatchStacksExamples) {
  SquaresDataset ds;
  const Example b = ds.get_batch({3, 1, 2});
  EXPECT_EQ(b.data.sizes(), (Shape{3, 2}));
  EXPECT_EQ(b.target.sizes(), (Shape{3}));
  const float* p = b.data.data_ptr<float>();
  EXPECT_EQ(std::vector<float>(p, p + 6), (std::vector<float>{9, 9, 1, 1, 4, 4}));
  const int64_t* t = b.target.data_ptr<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(t, t + 3), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EMBER_ERROR(ds.get_batch({0, 5}), "get_batch", "example 5", "[3]", "[2]", "same shape");
}

}  // namespace
}  // namespace ember::data
