#include "nn/layers/simple.h"

#include "nn/functional.h"
#include "nn/init.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::nn {

Tensor ReLU::forward(const Tensor& input) { return inplace_ ? relu_(input) : relu(input); }
Tensor MaxPool2d::forward(const Tensor& input) { return max_pool2d(input, kernel_, stride_, padding_); }
Tensor AvgPool2d::forward(const Tensor& input) { return avg_pool2d(input, kernel_, stride_, padding_); }
Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  return adaptive_avg_pool2d(input, output_size_);
}

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability has to be between 0 and 1, but got ", p);
}
Tensor Dropout::forward(const Tensor& input) {
  return functional::dropout(input, p_, is_training(), gen_);
}
std::string Dropout::extra_repr() const { return detail::str_cat("p=", p_); }

Tensor Flatten::forward(const Tensor& input) { return input.flatten(start_, end_); }

GELU::GELU(const std::string& approximate)
    : Module("GELU"), name_(approximate), approximate_(gelu_approximation(approximate)) {}
Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }
std::string GELU::extra_repr() const { return detail::str_cat("approximate='", name_, "'"); }

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : Module("LayerNorm"), shape_(std::move(normalized_shape)), eps_(eps), affine_(elementwise_affine) {
  if (affine_) {
    register_parameter("weight", ones(shape_));
    register_parameter("bias", zeros(shape_));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  const int64_t n = static_cast<int64_t>(shape_.size());
  EMBER_CHECK(input.dim() >= n && Shape(input.sizes().end() - n, input.sizes().end()) == shape_,
              "LayerNorm: expected input with trailing shape ", shape_to_string(shape_), ", got ",
              input.describe());
  return functional::layer_norm(input, n, affine_ ? param("weight") : Tensor(),
                                affine_ ? param("bias") : Tensor(), eps_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, bool sparse, Generator* gen)
    : Module("Embedding"), num_(num_embeddings), dim_(embedding_dim), sparse_(sparse) {
  register_parameter("weight", empty({num_embeddings, embedding_dim}));
  init::normal_(param("weight"), 0.0, 1.0, gen);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(param("weight"), indices, sparse_); }

std::string Embedding::extra_repr() const {
  return detail::str_cat(num_, ", ", dim_, sparse_ ? ", sparse=true" : "");
}

}  // namespace ember::nn
