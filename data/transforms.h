// Batch transforms for image data [B, C, H, W]: Normalize (per-channel mean/std), RandomCrop (with
// zero padding) and RandomHorizontalFlip, each drawing its randomness from a caller-supplied
// ember::Generator so that a run is reproducible. They work on whole batches, one pass each.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ember::data {

// A transform returns a new batch and never modifies its input (the dataset may hand out views of
// its own storage). Implementations are const and stateless, so one instance may serve many loaders.
class Transform {
 public:
  virtual ~Transform() = default;
  virtual Tensor operator()(const Tensor& batch, Generator& gen) const = 0;
  virtual std::string name() const = 0;
};

// uint8 pixels -> float32 in [0, 1] (torchvision's ToTensor scaling); float32 is returned as is and
// other dtypes are converted. The DataLoader applies this before any Transform.
Tensor to_float_batch(const Tensor& batch);

// out[b, c] = (in[b, c] - mean[c]) / std[c]; float32 input. A single mean/std applies to every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& batch, Generator& gen) const override;
  std::string name() const override { return "Normalize"; }

 private:
  std::vector<double> mean_;
  std::vector<double> std_;
};

// Pads every side with `padding` zeros, then cuts a random size x size window per image (torchvision's
// RandomCrop(size, padding) with fill 0). Per image it draws top, then left, uniform over the valid
// offsets. float32 or uint8; output [B, C, size, size].
class RandomCrop : public Transform {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0) : RandomCrop(size, size, padding) {}
  RandomCrop(int64_t height, int64_t width, int64_t padding);
  Tensor operator()(const Tensor& batch, Generator& gen) const override;
  std::string name() const override { return "RandomCrop"; }

 private:
  int64_t height_;
  int64_t width_;
  int64_t padding_;
};

// Mirrors each image left-right with probability p (one draw per image, all channels together).
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& batch, Generator& gen) const override;
  std::string name() const override { return "RandomHorizontalFlip"; }

 private:
  double p_;
};

using TransformList = std::vector<std::shared_ptr<const Transform>>;

// Runs the transforms in order.
Tensor apply_transforms(const TransformList& transforms, Tensor batch, Generator& gen);

}  // namespace ember::data
