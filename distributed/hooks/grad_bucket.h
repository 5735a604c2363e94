// GradBucket: what a communication hook sees of one DDP bucket (PyTorch's dist.GradBucket): the
// flat buffer of gradients, per-parameter views, offsets/lengths/sizes, and the parameters. A hook
// may replace the buffer (set_buffer) and returns a Future of the reduced buffer.
#pragma once

#include <cstddef>
#include <vector>

#include "tensor/tensor.h"

namespace ember::distributed {

// One DDP bucket as a comm hook sees it (PyTorch's dist.GradBucket). The buffer arrives divided by
// the world size only for the default hook: Note [Who divides gradients by the world size].
class GradBucket {
 public:
  GradBucket(size_t index, size_t bucket_count, Tensor buffer, std::vector<size_t> offsets,
             std::vector<size_t> lengths, std::vector<Shape> sizes, std::vector<Tensor> parameters)
      : index_(index),
        bucket_count_(bucket_count),
        buffer_(std::move(buffer)),
        offsets_(std::move(offsets)),
        lengths_(std::move(lengths)),
        sizes_(std::move(sizes)),
        parameters_(std::move(parameters)) {}

  size_t index() const { return index_; }
  bool is_last() const { return index_ + 1 == bucket_count_; }
  // The flattened gradients (a sparse tensor for a sparse bucket).
  const Tensor& buffer() const { return buffer_; }
  void set_buffer(const Tensor& buffer) { buffer_ = buffer; }
  // One view of the buffer per parameter, shaped like it.
  std::vector<Tensor> gradients() const;
  const std::vector<Tensor>& parameters() const { return parameters_; }
  const std::vector<size_t>& offsets() const { return offsets_; }
  const std::vector<size_t>& lengths() const { return lengths_; }
  const std::vector<Shape>& sizes() const { return sizes_; }

 private:
  size_t index_, bucket_count_;
  Tensor buffer_;
  std::vector<size_t> offsets_, lengths_;
  std::vector<Shape> sizes_;
  std::vector<Tensor> parameters_;
};

}  // namespace ember::distributed
