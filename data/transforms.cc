#include "data/transforms.h"

#include <algorithm>
#include <cstring>

#include "tensor/factories.h"

namespace ember::data {

namespace {

// Batches are [B, C, H, W]; transforms walk them as B*C planes of H*W contiguous elements.
Tensor check_image_batch(const Tensor& batch, const std::string& op, bool float_only) {
  EMBER_CHECK(batch.defined() && batch.is_cpu() && batch.dim() == 4, op,
              ": expected a CPU image batch [B, C, H, W], got ",
              batch.defined() ? batch.describe() : std::string("an undefined tensor"));
  EMBER_CHECK(batch.dtype() == kFloat32 || (!float_only && batch.dtype() == kUInt8), op,
              ": expected ", float_only ? "float32" : "float32 or uint8", " images, got ",
              batch.describe());
  return batch.contiguous();
}

template <typename T>
void crop_planes(const T* src, T* dst, int64_t b_count, int64_t c_count, int64_t h, int64_t w,
                 int64_t out_h, int64_t out_w, int64_t padding, Generator& gen) {
  // Offsets into the padded image; rows/cols that fall in the padding are zero.
  const uint64_t top_range = static_cast<uint64_t>(h + 2 * padding - out_h + 1);
  const uint64_t left_range = static_cast<uint64_t>(w + 2 * padding - out_w + 1);
  for (int64_t b = 0; b < b_count; ++b) {
    const int64_t top = static_cast<int64_t>(gen.next_below(top_range)) - padding;
    const int64_t left = static_cast<int64_t>(gen.next_below(left_range)) - padding;
    // Columns x of the output with 0 <= left + x < w are copied; the rest are zero.
    const int64_t x0 = std::clamp<int64_t>(-left, 0, out_w);
    const int64_t x1 = std::clamp<int64_t>(w - left, x0, out_w);
    for (int64_t c = 0; c < c_count; ++c) {
      const T* plane = src + (b * c_count + c) * h * w;
      T* out = dst + (b * c_count + c) * out_h * out_w;
      for (int64_t y = 0; y < out_h; ++y) {
        T* row = out + y * out_w;
        const int64_t sy = top + y;
        if (sy < 0 || sy >= h || x1 <= x0) {
          std::fill(row, row + out_w, T(0));
          continue;
        }
        std::fill(row, row + x0, T(0));
        std::memcpy(row + x0, plane + sy * w + left + x0, (x1 - x0) * sizeof(T));
        std::fill(row + x1, row + out_w, T(0));
      }
    }
  }
}

template <typename T>
void flip_planes(const T* src, T* dst, int64_t b_count, int64_t c_count, int64_t h, int64_t w, double p,
                 Generator& gen) {
  const int64_t image = c_count * h * w;
  for (int64_t b = 0; b < b_count; ++b) {
    const T* in = src + b * image;
    T* out = dst + b * image;
    if (gen.next_double() >= p) {
      std::memcpy(out, in, image * sizeof(T));
      continue;
    }
    for (int64_t r = 0; r < c_count * h; ++r) std::reverse_copy(in + r * w, in + (r + 1) * w, out + r * w);
  }
}

}  // namespace

Tensor to_float_batch(const Tensor& batch) {
  EMBER_CHECK(batch.defined(), "to_float_batch: undefined tensor");
  if (batch.dtype() == kFloat32) return batch;
  if (batch.dtype() != kUInt8) return batch.to(kFloat32);
  const Tensor src = batch.contiguous();
  Tensor out = empty(src.sizes(), TensorOptions(kFloat32, src.device()));
  const uint8_t* in = src.data_ptr<uint8_t>();
  float* o = out.data_ptr<float>();
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(in[i]) * (1.0f / 255.0f);
  return out;
}

// ---- Normalize ------------------------------------------------------------------------------------

Normalize::Normalize(std::vector<double> mean, std::vector<double> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  EMBER_CHECK(!mean_.empty() && mean_.size() == std_.size(), "Normalize: mean and std must be non-empty and ",
              "of equal length, got ", mean_.size(), " and ", std_.size());
  for (size_t c = 0; c < std_.size(); ++c) {
    EMBER_CHECK(std_[c] != 0.0, "Normalize: std[", c, "] is 0, which would divide by zero");
  }
}

Tensor Normalize::operator()(const Tensor& batch, Generator& /*gen*/) const {
  const Tensor in = check_image_batch(batch, "Normalize", /*float_only=*/true);
  const int64_t b_count = in.size(0), c_count = in.size(1), plane = in.size(2) * in.size(3);
  EMBER_CHECK(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == c_count, "Normalize: ",
              mean_.size(), " means/stds given for a batch with ", c_count, " channels ", in.describe());
  Tensor out = empty(in.sizes(), TensorOptions(kFloat32, kCPU));
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t b = 0; b < b_count; ++b) {
    for (int64_t c = 0; c < c_count; ++c) {
      const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(c);
      // x * scale + shift instead of (x - mean) / std: one FMA per pixel, vectorised.
      const float scale = static_cast<float>(1.0 / std_[k]);
      const float shift = static_cast<float>(-mean_[k] / std_[k]);
      const float* s = src + (b * c_count + c) * plane;
      float* d = dst + (b * c_count + c) * plane;
      for (int64_t i = 0; i < plane; ++i) d[i] = s[i] * scale + shift;
    }
  }
  return out;
}

// ---- RandomCrop -----------------------------------------------------------------------------------

RandomCrop::RandomCrop(int64_t height, int64_t width, int64_t padding)
    : height_(height), width_(width), padding_(padding) {
  EMBER_CHECK(height > 0 && width > 0 && padding >= 0, "RandomCrop: size must be positive and padding ",
              "non-negative, got size ", height, "x", width, " and padding ", padding);
}

Tensor RandomCrop::operator()(const Tensor& batch, Generator& gen) const {
  const Tensor in = check_image_batch(batch, "RandomCrop", /*float_only=*/false);
  const int64_t b = in.size(0), c = in.size(1), h = in.size(2), w = in.size(3);
  EMBER_CHECK(h + 2 * padding_ >= height_ && w + 2 * padding_ >= width_, "RandomCrop: crop ", height_, "x",
              width_, " is larger than the padded image ", h + 2 * padding_, "x", w + 2 * padding_,
              " (images ", h, "x", w, ", padding ", padding_, ")");
  Tensor out = empty({b, c, height_, width_}, TensorOptions(in.dtype(), kCPU));
  if (in.dtype() == kFloat32) {
    crop_planes(in.data_ptr<float>(), out.data_ptr<float>(), b, c, h, w, height_, width_, padding_, gen);
  } else {
    crop_planes(in.data_ptr<uint8_t>(), out.data_ptr<uint8_t>(), b, c, h, w, height_, width_, padding_,
                gen);
  }
  return out;
}

// ---- RandomHorizontalFlip -------------------------------------------------------------------------

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& batch, Generator& gen) const {
  const Tensor in = check_image_batch(batch, "RandomHorizontalFlip", /*float_only=*/false);
  const int64_t b = in.size(0), c = in.size(1), h = in.size(2), w = in.size(3);
  Tensor out = empty(in.sizes(), TensorOptions(in.dtype(), kCPU));
  if (in.dtype() == kFloat32) {
    flip_planes(in.data_ptr<float>(), out.data_ptr<float>(), b, c, h, w, p_, gen);
  } else {
    flip_planes(in.data_ptr<uint8_t>(), out.data_ptr<uint8_t>(), b, c, h, w, p_, gen);
  }
  return out;
}

Tensor apply_transforms(const TransformList& transforms, Tensor batch, Generator& gen) {
  for (const auto& t : transforms) {
    EMBER_CHECK(t != nullptr, "apply_transforms: null transform in the list");
    batch = (*t)(batch, gen);
  }
  return batch;
}

}  // namespace ember::data
