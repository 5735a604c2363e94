// TensorDataset: a Dataset over two in-memory tensors, data [N, ...] (e.g. uint8 or float32 images
// [N, C, H, W]) and int64 targets [N]. get_batch gathers a batch with one memcpy per sample, which is
// what keeps the DataLoader's batch assembly off the training step's critical path.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "tensor/tensor.h"

namespace ember::data {

// PyTorch's TensorDataset over (data, targets): sample i is (data[i], targets[i]). The constructor
// and lookups throw ember::Error on bad tensors or an index out of range.
class TensorDataset : public Dataset {
 public:
  // Both on the CPU with the same first dimension; targets int64. Non-contiguous data is copied
  // once here so that every sample is a contiguous run of bytes.
  TensorDataset(Tensor data, Tensor targets);

  int64_t size() const override { return size_; }
  // data[index] and targets[index] as views (no copy) of the dataset's tensors.
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;

  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  void check_index(int64_t index, const char* op) const;

  Tensor data_;
  Tensor targets_;
  int64_t size_ = 0;
};

}  // namespace ember::data
