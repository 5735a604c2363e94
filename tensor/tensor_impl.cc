#include "tensor/tensor_impl.h"

namespace ember {

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return strides;
}

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

TensorImpl::TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t storage_offset,
                       ScalarType dtype, std::shared_ptr<VersionCounter> version)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      storage_offset_(storage_offset),
      dtype_(dtype),
      version_(version ? std::move(version) : std::make_shared<VersionCounter>()) {
  refresh();
}

void TensorImpl::set_geometry(Shape sizes, Shape strides, int64_t storage_offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  storage_offset_ = storage_offset;
  refresh();
}

void TensorImpl::refresh() {
  numel_ = shape_numel(sizes_);
  // Contiguous = row-major dense; size-1 dims may have any stride (as in PyTorch).
  is_contiguous_ = true;
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes_.size()) - 1; i >= 0; --i) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) {
      is_contiguous_ = numel_ == 0;
      if (!is_contiguous_) break;
    }
    expected *= sizes_[i];
  }
}

}  // namespace ember
