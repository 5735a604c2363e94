// nn::functional: losses and regularisers built from the tensor library's primitives, so their
// gradients come from autograd (cross_entropy = log_softmax + nll_loss, with label smoothing).
#pragma once

#include <optional>

#include "tensor/generator.h"
#include "tensor/nn_ops.h"
#include "tensor/tensor.h"

namespace ember::nn::functional {

// input [N, C] logits, target int64 [N].
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean,
                     double label_smoothing = 0.0, int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);
// Zeroes each element with probability p and scales the rest by 1/(1-p) (identity in eval).
Tensor dropout(const Tensor& input, double p, bool training, Generator* gen = nullptr);
// Normalises over the trailing `normalized_ndim` dims; weight/bias may be undefined.
Tensor layer_norm(const Tensor& input, int64_t normalized_ndim, const Tensor& weight,
                  const Tensor& bias, double eps = 1e-5);

// torch.nn.functional.scaled_dot_product_attention over query [..., L, E], key [..., S, E] and
// value [..., S, Ev]: softmax(q k^T * scale + causal mask) v -> [..., L, Ev]. With is_causal,
// query i attends to keys j <= i (the top-left aligned lower triangle, as PyTorch's). Batch dims
// broadcast as matmul's do. Dropout on the attention weights when dropout_p > 0.
struct AttentionOptions {
  bool is_causal = false;
  double dropout_p = 0.0;
  std::optional<double> scale;  // default 1 / sqrt(E)
  Generator* generator = nullptr;  // dropout's stream (default generator when null)
};
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    bool is_causal = false);
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& options);

}  // namespace ember::nn::functional
