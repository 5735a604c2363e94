// TensorImpl: storage + sizes + strides + element offset + dtype. Every view is a new TensorImpl over
// the same Storage (PyTorch's StorageImpl/TensorImpl split). The autograd layer hangs its metadata off
// an opaque interface here, so tensor/ never depends on autograd/.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/autograd_interface.h"
#include "tensor/dtype.h"
#include "tensor/storage.h"

namespace ember {

using Shape = std::vector<int64_t>;

// Shared by a tensor and all its views; bumped by every in-place op so autograd can tell that a
// tensor it saved for backward has been modified since.
struct VersionCounter {
  uint32_t version = 0;
};

// Dense tensors are strided views of a Storage; sparse COO tensors (tensor/sparse.h) hold an
// indices tensor and a values tensor instead and have no storage of their own.
enum class Layout : int8_t { kStrided, kSparse };

// What a Tensor handle points at (PyTorch's c10::TensorImpl): a Storage viewed with sizes, strides,
// an element offset and a dtype, plus its autograd meta and the version counter its views share.
class TensorImpl {
 public:
  TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t storage_offset, ScalarType dtype,
             std::shared_ptr<VersionCounter> version = nullptr);
  virtual ~TensorImpl() = default;
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  virtual Layout layout() const { return Layout::kStrided; }

  const Storage& storage() const { return storage_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t storage_offset() const { return storage_offset_; }
  ScalarType dtype() const { return dtype_; }
  virtual Device device() const { return storage_.device(); }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return is_contiguous_; }
  void* data() const {
    return static_cast<char*>(storage_.data()) + storage_offset_ * static_cast<int64_t>(element_size(dtype_));
  }

  const std::shared_ptr<VersionCounter>& version_counter() const { return version_; }
  AutogradMetaInterface* autograd_meta() const { return autograd_meta_.get(); }
  const std::shared_ptr<AutogradMetaInterface>& autograd_meta_ptr() const { return autograd_meta_; }
  void set_autograd_meta(std::shared_ptr<AutogradMetaInterface> m) { autograd_meta_ = std::move(m); }

  // Only for ops that rebind a tensor's geometry in place (resize of an empty output, set_).
  void set_geometry(Shape sizes, Shape strides, int64_t storage_offset);

 private:
  void refresh();

  Storage storage_;
  Shape sizes_;
  Shape strides_;
  int64_t storage_offset_;
  ScalarType dtype_;
  int64_t numel_ = 1;
  bool is_contiguous_ = true;
  std::shared_ptr<VersionCounter> version_;
  std::shared_ptr<AutogradMetaInterface> autograd_meta_;
};

Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);

}  // namespace ember
