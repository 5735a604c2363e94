// log_softmax (numerically stable: subtract the max), nll_loss, and embedding lookups, composed
// of device ops (reductions, gather, scatter_add), so they run on every device.

#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

// Every counted target is a class in [0, C); otherwise the error names the first bad one.
void check_classes(const Tensor& target, const Tensor& classes, int64_t C, int64_t ignore_index) {
  if (target.numel() == 0) return;
  if (min(classes).item<int64_t>() >= 0 && max(classes).item<int64_t>() < C) return;
  const Tensor t = target.cpu().contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    EMBER_CHECK(tp[i] == ignore_index || (tp[i] >= 0 && tp[i] < C), "nll_loss: target ", tp[i],
                " at position ", i, " is out of bounds for ", C, " classes");
  }
}

}  // namespace

Tensor log_softmax(const Tensor& input, int64_t dim) {
  if (auto f = autograd_kernel(&AutogradKernels::log_softmax, {&input})) return f(input, dim);
  EMBER_CHECK(input.defined(), "log_softmax: undefined input");
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "log_softmax: supports float32 and float64, got ", input.describe());
  if (input.dim() == 0) return sub(input, input);  // log(1)
  dim = wrap_dim(dim, input.dim(), "log_softmax");
  // (x - max) - log(sum exp(x - max)), the sum in double: subtracting the max first keeps large
  // logits exact, and each step is a device op, so this runs wherever the input is.
  const Tensor shifted = sub(input, std::get<0>(max(input, dim, /*keepdim=*/true)));
  const Tensor sum_exp = sum(exp(shifted.to(kFloat64)), {dim}, /*keepdim=*/true);
  return sub(shifted, log(sum_exp).to(input.dtype()));
}

Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& output, int64_t dim) {
  dim = wrap_dim(dim, output.dim(), "log_softmax_backward");
  // dx = g - softmax * sum(g)
  Tensor s = sum(grad_out, {dim}, /*keepdim=*/true);
  return sub(grad_out, mul(exp(output), s));
}

Tensor softmax(const Tensor& input, int64_t dim) { return exp(log_softmax(input, dim)); }

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                int64_t ignore_index) {
  if (auto f = autograd_kernel(&AutogradKernels::nll_loss, {&log_probs})) {
    return f(log_probs, target, reduction, ignore_index);
  }
  EMBER_CHECK(log_probs.defined() && target.defined(), "nll_loss: undefined input or target");
  EMBER_CHECK(log_probs.dim() == 2, "nll_loss: expected input [N, C], got ", log_probs.describe());
  EMBER_CHECK(target.dim() == 1 && target.size(0) == log_probs.size(0) && target.dtype() == kInt64,
              "nll_loss: expected an int64 target of shape [", log_probs.size(0), "], got ",
              target.describe());
  EMBER_CHECK(target.device() == log_probs.device(), "nll_loss: target ", target.describe(),
              " must be on the input's device (", log_probs.describe(), ")");
  const int64_t C = log_probs.size(1);
  const Tensor counted = ne(target, ignore_index);
  // Ignored rows read class 0 (there is one when N > 0) and contribute 0.
  const Tensor classes = where(counted, target, zeros_like(target));
  check_classes(target, classes, C, ignore_index);
  const Tensor picked = gather(log_probs, 1, classes.unsqueeze(1)).squeeze(1);
  const Tensor losses = where(counted, neg(picked), zeros_like(picked));
  if (reduction == Reduction::kNone) return losses;
  Tensor total = sum(losses);
  // Mean over the targets that count (0/0 = NaN when all are ignored, as in PyTorch).
  const double count = static_cast<double>(sum(counted).item<int64_t>());
  return reduction == Reduction::kSum ? total : div(total, count);
}

Tensor nll_loss_backward(const Tensor& grad_out, const Tensor& log_probs, const Tensor& target,
                         Reduction reduction, int64_t ignore_index) {
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  const Tensor counted = ne(target, ignore_index);
  const Tensor classes = where(counted, target, zeros_like(target));
  // d loss / d log_probs[i, target[i]] = -g[i] (none), -g (sum), -g / count (mean), in double.
  Tensor g = grad_out.to(kFloat64);
  if (reduction == Reduction::kMean) {
    g = div(g, static_cast<double>(sum(counted).item<int64_t>()));
  }
  const Tensor per_row = reduction == Reduction::kNone ? g : g.expand({N});
  const Tensor values = where(counted, neg(per_row), zeros_like(per_row)).to(log_probs.dtype());
  Tensor gi = zeros({N, C}, TensorOptions(log_probs.dtype(), log_probs.device()));
  scatter_add_(gi, 1, classes.unsqueeze(1), values.unsqueeze(1));
  return gi;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, bool sparse) {
  if (auto f = autograd_kernel(&AutogradKernels::embedding, {&weight})) {
    return f(weight, indices, sparse);
  }
  EMBER_CHECK(weight.defined() && weight.dim() == 2, "embedding: weight must be 2-d [num, dim], got ",
              weight.describe());
  EMBER_CHECK(indices.defined() && (indices.dtype() == kInt64 || indices.dtype() == kInt32),
              "embedding: indices must be an int64 or int32 tensor, got ", indices.describe());
  Shape shape = indices.sizes();
  shape.push_back(weight.size(1));
  return index_select(weight, 0, indices.reshape({-1})).view(shape);
}

}  // namespace ember
