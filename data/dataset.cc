#include "data/dataset.h"

#include <cstring>

#include "tensor/factories.h"

namespace ember::data {

namespace {

// Copies `sample` into row `row` of `batch`, whose rows must all have the first sample's shape.
void copy_row(const Tensor& batch, int64_t row, const Tensor& sample, const char* what, int64_t index) {
  Shape expected(batch.sizes().begin() + 1, batch.sizes().end());
  EMBER_CHECK(sample.sizes() == expected && sample.dtype() == batch.dtype(),
              "Dataset::get_batch: ", what, " of example ", index, " is ", sample.describe(),
              " but the first example's is ", dtype_name(batch.dtype()), shape_to_string(expected),
              "; every example must have the same shape and dtype");
  const Tensor src = sample.contiguous();
  const size_t bytes = src.nbytes();
  std::memcpy(static_cast<char*>(batch.data_ptr()) + static_cast<size_t>(row) * bytes,
              src.data_ptr(), bytes);
}

Tensor batch_like(const Tensor& first, int64_t batch_size) {
  Shape sizes{batch_size};
  sizes.insert(sizes.end(), first.sizes().begin(), first.sizes().end());
  return empty(sizes, TensorOptions(first.dtype(), kCPU));
}

}  // namespace

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  EMBER_CHECK(!indices.empty(), "Dataset::get_batch: empty list of indices");
  const int64_t b = static_cast<int64_t>(indices.size());
  Example first = get(indices[0]);
  EMBER_CHECK(first.data.defined() && first.target.defined() && first.data.is_cpu() &&
                  first.target.is_cpu(),
              "Dataset::get_batch: get(", indices[0], ") must return defined CPU tensors");
  Example out{batch_like(first.data, b), batch_like(first.target, b)};
  for (int64_t r = 0; r < b; ++r) {
    Example e = r == 0 ? first : get(indices[r]);
    copy_row(out.data, r, e.data, "data", indices[r]);
    copy_row(out.target, r, e.target, "target", indices[r]);
  }
  return out;
}

}  // namespace ember::data
