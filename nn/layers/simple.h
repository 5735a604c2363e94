// Stateless or nearly stateless layers: ReLU, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Dropout,
// Flatten, LayerNorm, Embedding (sparse=true gives sparse weight gradients).
#pragma once

#include "nn/module.h"
#include "tensor/generator.h"
#include "tensor/nn_ops.h"

namespace ember::nn {

// inplace = true overwrites the input (nn.ReLU(inplace=True)): no new tensor, and the input's
// own producer must not need it for its backward (batch norm and addition do not).
class ReLU : public Module {
 public:
  explicit ReLU(bool inplace = false) : Module("ReLU"), inplace_(inplace) {}
  Tensor forward(const Tensor& input) override;

 private:
  bool inplace_;
};

// PyTorch's torch.nn.MaxPool2d over [N, C, H, W] or [C, H, W]; stride {0, 0} (the default) means
// the kernel size.
class MaxPool2d : public Module {
 public:
  MaxPool2d(Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0})
      : Module("MaxPool2d"), kernel_(kernel), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& input) override;

 private:
  Pair kernel_, stride_, padding_;
};

// PyTorch's torch.nn.AvgPool2d (count_include_pad=true) over [N, C, H, W] or [C, H, W]; stride
// {0, 0} (the default) means the kernel size.
class AvgPool2d : public Module {
 public:
  AvgPool2d(Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0})
      : Module("AvgPool2d"), kernel_(kernel), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& input) override;

 private:
  Pair kernel_, stride_, padding_;
};

// PyTorch's torch.nn.AdaptiveAvgPool2d: averages each plane into output_size cells whatever its
// size ({1, 1}: global average pooling).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size) : Module("AdaptiveAvgPool2d"), output_size_(output_size) {}
  Tensor forward(const Tensor& input) override;

 private:
  Pair output_size_;
};

// PyTorch's torch.nn.Dropout: in training mode zeroes each element with probability p and scales
// the rest by 1 / (1 - p); the identity in eval mode. The constructor throws unless 0 <= p <= 1.
class Dropout : public Module {
 public:
  // gen: the stream masks are drawn from (default generator when null); seed it for reproducibility.
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  double p_;
  Generator* gen_;
};

// PyTorch's torch.nn.GELU: gelu(input, approximate), approximate "none" (erf) or "tanh"; the
// constructor throws for other names.
class GELU : public Module {
 public:
  explicit GELU(const std::string& approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::string name_;
  GeluApproximation approximate_;
};

// PyTorch's torch.nn.Flatten: input.flatten(start_dim, end_dim); by default all dims but the first.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& input) override;

 private:
  int64_t start_, end_;
};

// PyTorch's torch.nn.LayerNorm: normalises over the trailing dims normalized_shape (forward throws
// if the input does not end with them), then applies weight (ones) and bias (zeros) when affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;

 private:
  Shape shape_;
  double eps_;
  bool affine_;
};

// PyTorch's torch.nn.Embedding: weight [num_embeddings, embedding_dim], initialised N(0, 1), whose
// rows forward picks by int64 indices of any shape; sparse = true makes its gradient sparse COO.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, bool sparse = false,
            Generator* gen = nullptr);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  bool sparse() const { return sparse_; }
  Tensor& weight() { return param("weight"); }

 private:
  int64_t num_, dim_;
  bool sparse_;
};

}  // namespace ember::nn
