#include "data/tensor_dataset.h"

#include <cstring>

#include "tensor/factories.h"

namespace ember::data {

TensorDataset::TensorDataset(Tensor data, Tensor targets) {
  EMBER_CHECK(data.defined() && targets.defined(), "TensorDataset: data and targets must be defined");
  EMBER_CHECK(data.is_cpu() && targets.is_cpu(), "TensorDataset: tensors must be on the CPU, got data ",
              data.describe(), " and targets ", targets.describe());
  EMBER_CHECK(data.dim() >= 1, "TensorDataset: data must have a leading sample dimension, got ",
              data.describe());
  EMBER_CHECK(targets.dtype() == kInt64, "TensorDataset: targets must be int64 class indices, got ",
              targets.describe());
  EMBER_CHECK(targets.dim() >= 1 && targets.size(0) == data.size(0),
              "TensorDataset: data ", data.describe(), " and targets ", targets.describe(),
              " must have the same first dimension");
  data_ = data.contiguous();
  targets_ = targets.contiguous();
  size_ = data_.size(0);
}

void TensorDataset::check_index(int64_t index, const char* op) const {
  EMBER_CHECK(index >= 0 && index < size_, "TensorDataset::", op, ": index ", index,
              " is out of range for a dataset of size ", size_);
}

Example TensorDataset::get(int64_t index) const {
  check_index(index, "get");
  return {data_.select(0, index), targets_.select(0, index)};
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  EMBER_CHECK(!indices.empty(), "TensorDataset::get_batch: empty list of indices");
  const int64_t b = static_cast<int64_t>(indices.size());
  Shape data_sizes = data_.sizes();
  data_sizes[0] = b;
  Shape target_sizes = targets_.sizes();
  target_sizes[0] = b;
  Example out{empty(data_sizes, TensorOptions(data_.dtype(), kCPU)),
              empty(target_sizes, TensorOptions(kInt64, kCPU))};
  const size_t data_row = size_ == 0 ? 0 : data_.nbytes() / static_cast<size_t>(size_);
  const size_t target_row = size_ == 0 ? 0 : targets_.nbytes() / static_cast<size_t>(size_);
  const char* data_src = static_cast<const char*>(data_.data_ptr());
  const char* target_src = static_cast<const char*>(targets_.data_ptr());
  char* data_dst = static_cast<char*>(out.data.data_ptr());
  char* target_dst = static_cast<char*>(out.target.data_ptr());
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[r];
    check_index(i, "get_batch");
    std::memcpy(data_dst + r * data_row, data_src + i * data_row, data_row);
    std::memcpy(target_dst + r * target_row, target_src + i * target_row, target_row);
  }
  return out;
}

}  // namespace ember::data
