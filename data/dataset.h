// Dataset: the interface every data source implements (size, one example by index, and a whole batch
// from a list of indices), and Example, the (data, target) pair it returns. The DataLoader only sees
// this interface; TensorDataset (tensor_dataset.h) is the in-memory implementation.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ember::data {

// One sample, or a batch of them stacked along a new leading dimension.
struct Example {
  Tensor data;
  Tensor target;
};

// Implementations must be safe to call from the DataLoader's prefetch thread while the training
// thread runs: get/get_batch are const and must not mutate shared state.
class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Example `index` in [0, size()).
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices` stacked into data [B, ...] and target [B, ...]. The default calls get()
  // per index and copies each sample with one memcpy; in-memory datasets override it to skip get().
  virtual Example get_batch(const std::vector<int64_t>& indices) const;
};

}  // namespace ember::data
