// scaled_dot_product_attention as PyTorch's reference math: two batched products around a
// softmax, the causal mask a -inf fill of the upper triangle; the gradients come from autograd.
#include <cmath>
#include <limits>

#include "nn/functional.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::nn::functional {
namespace {

void check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  EMBER_CHECK(q.defined() && k.defined() && v.defined(),
              "scaled_dot_product_attention: undefined query, key or value");
  EMBER_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "scaled_dot_product_attention: query, key and value need at least 2 dims, got ",
              q.describe(), ", ", k.describe(), ", ", v.describe());
  EMBER_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype() && is_floating_point(q.dtype()),
              "scaled_dot_product_attention: expected query, key and value of one floating dtype, got ",
              q.describe(), ", ", k.describe(), ", ", v.describe());
  EMBER_CHECK(q.device() == k.device() && k.device() == v.device(),
              "scaled_dot_product_attention: query, key and value must be on one device, got ",
              q.describe(), ", ", k.describe(), ", ", v.describe());
  EMBER_CHECK(q.size(-1) == k.size(-1),
              "scaled_dot_product_attention: query and key must have the same last dim (E), got ",
              q.shape_str(), " and ", k.shape_str());
  EMBER_CHECK(k.size(-2) == v.size(-2),
              "scaled_dot_product_attention: key and value must have the same length (S), got ",
              k.shape_str(), " and ", v.shape_str());
}

// True above the diagonal: key j is after query i.
Tensor causal_mask(int64_t L, int64_t S, Device device) {
  Tensor mask = empty({L, S}, TensorOptions(kBool));
  bool* m = mask.data_ptr<bool>();
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < S; ++j) m[i * S + j] = j > i;
  }
  return mask.to(device);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    bool is_causal) {
  AttentionOptions options;
  options.is_causal = is_causal;
  return scaled_dot_product_attention(query, key, value, options);
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& options) {
  check_attention_inputs(query, key, value);
  EMBER_CHECK(options.dropout_p >= 0.0 && options.dropout_p < 1.0,
              "scaled_dot_product_attention: dropout_p must be in [0, 1), got ", options.dropout_p);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(query.size(-1))));
  Tensor scores = mul(matmul(query, transpose(key, -2, -1)), scale);
  if (options.is_causal) {
    const Tensor mask = causal_mask(query.size(-2), key.size(-2), query.device());
    scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  }
  Tensor weights = softmax(scores, -1);
  if (options.dropout_p > 0.0) weights = dropout(weights, options.dropout_p, true, options.generator);
  return matmul(weights, value);
}

}  // namespace ember::nn::functional
