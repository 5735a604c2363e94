#include "nn/functional.h"

#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::nn::functional {

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                     double label_smoothing, int64_t ignore_index) {
  EMBER_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  Tensor lp = log_softmax(input, 1);
  Tensor nll = nll_loss(lp, target, reduction, ignore_index);
  if (label_smoothing == 0.0) return nll;
  // PyTorch: (1 - eps) * nll + eps * mean over classes of -log p (ignored targets excluded).
  const int64_t C = input.size(1);
  Tensor keep = ne(target, ignore_index).to(lp.dtype());            // [N]
  Tensor smooth = mul(neg(sum(lp, {1})), keep);                     // [N]
  Tensor smooth_red;
  if (reduction == Reduction::kNone) {
    smooth_red = smooth;
  } else if (reduction == Reduction::kSum) {
    smooth_red = sum(smooth);
  } else {
    smooth_red = div(sum(smooth), sum(keep));
  }
  return add(mul(nll, 1.0 - label_smoothing), mul(smooth_red, label_smoothing / static_cast<double>(C)));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  EMBER_CHECK(input.sizes() == target.sizes(), "mse_loss: input ", input.describe(),
              " and target ", target.describe(), " must have the same shape");
  Tensor d = sub(input, target);
  Tensor sq = mul(d, d);
  if (reduction == Reduction::kNone) return sq;
  return reduction == Reduction::kSum ? sum(sq) : mean(sq);
}

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return input;
  if (p == 1.0) return mul(input, 0.0);
  Tensor keep = lt(rand(input.sizes(), gen, TensorOptions(input.dtype(), input.device())), 1.0 - p);
  return mul(input, mul(keep.to(input.dtype()), 1.0 / (1.0 - p)));
}

Tensor layer_norm(const Tensor& input, int64_t normalized_ndim, const Tensor& weight,
                  const Tensor& bias, double eps) {
  EMBER_CHECK(normalized_ndim >= 1 && normalized_ndim <= input.dim(), "layer_norm: cannot normalise ",
              normalized_ndim, " trailing dims of ", input.describe());
  Shape dims;
  for (int64_t d = input.dim() - normalized_ndim; d < input.dim(); ++d) dims.push_back(d);
  Tensor mu = mean(input, dims, true);
  Tensor xc = sub(input, mu);
  Tensor var = mean(mul(xc, xc), dims, true);  // biased, as PyTorch's layer_norm
  Tensor y = mul(xc, rsqrt(add(var, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

}  // namespace ember::nn::functional
