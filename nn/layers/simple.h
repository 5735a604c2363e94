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

class MaxPool2d : public Module {
 public:
  MaxPool2d(Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0})
      : Module("MaxPool2d"), kernel_(kernel), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& input) override;

 private:
  Pair kernel_, stride_, padding_;
};

class AvgPool2d : public Module {
 public:
  AvgPool2d(Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0})
      : Module("AvgPool2d"), kernel_(kernel), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& input) override;

 private:
  Pair kernel_, stride_, padding_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size) : Module("AdaptiveAvgPool2d"), output_size_(output_size) {}
  Tensor forward(const Tensor& input) override;

 private:
  Pair output_size_;
};

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

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& input) override;

 private:
  int64_t start_, end_;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;

 private:
  Shape shape_;
  double eps_;
  bool affine_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, bool sparse = false,
            Generator* gen = nullptr);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  bool sparse() const { return sparse_; }

 private:
  int64_t num_, dim_;
  bool sparse_;
};

}  // namespace ember::nn
