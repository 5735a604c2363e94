// log_softmax (numerically stable: subtract the max), nll_loss, and embedding lookups.
#include <cmath>
#include <limits>

#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

// Views t as [outer, D, inner] around `dim`.
void split_dims(const Tensor& t, int64_t dim, int64_t& outer, int64_t& D, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.size(d);
  D = t.dim() == 0 ? 1 : t.size(dim);
}

}  // namespace

Tensor log_softmax(const Tensor& input, int64_t dim) {
  if (auto f = autograd_kernel(&AutogradKernels::log_softmax, {&input})) return f(input, dim);
  EMBER_CHECK(input.defined() && input.is_cpu(), "log_softmax: expected a CPU tensor, got ",
              input.describe());
  dim = wrap_dim(dim, input.dim(), "log_softmax");
  int64_t outer, D, inner;
  split_dims(input, dim, outer, D, inner);
  Tensor in = input.contiguous();
  Tensor out = empty(input.sizes(), input.dtype());
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "log_softmax", [&] {
    const scalar_t* x = in.data_ptr<scalar_t>();
    scalar_t* y = out.data_ptr<scalar_t>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const scalar_t* xp = x + o * D * inner + i;
        scalar_t* yp = y + o * D * inner + i;
        scalar_t mx = -std::numeric_limits<scalar_t>::infinity();
        for (int64_t d = 0; d < D; ++d) mx = std::max(mx, xp[d * inner]);
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += std::exp(double(xp[d * inner] - mx));
        // (x - max) - log(sum): subtracting max first keeps large logits exact.
        const scalar_t log_sum = scalar_t(std::log(s));
        for (int64_t d = 0; d < D; ++d) yp[d * inner] = (xp[d * inner] - mx) - log_sum;
      }
    }
  });
  return out;
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
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  Tensor lp = log_probs.contiguous();
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  Tensor losses = zeros({N}, log_probs.dtype());
  int64_t count = 0;
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(log_probs.dtype(), "nll_loss", [&] {
    const scalar_t* p = lp.data_ptr<scalar_t>();
    scalar_t* l = losses.data_ptr<scalar_t>();
    for (int64_t i = 0; i < N; ++i) {
      if (tp[i] == ignore_index) continue;
      EMBER_CHECK(tp[i] >= 0 && tp[i] < C, "nll_loss: target ", tp[i], " at position ", i,
                  " is out of bounds for ", C, " classes");
      l[i] = -p[i * C + tp[i]];
      ++count;
    }
  });
  if (reduction == Reduction::None) return losses;
  Tensor total = sum(losses);
  // Mean over the targets that count (0/0 = NaN when all are ignored, as in PyTorch).
  return reduction == Reduction::Sum ? total : div(total, static_cast<double>(count));
}

Tensor nll_loss_backward(const Tensor& grad_out, const Tensor& log_probs, const Tensor& target,
                         Reduction reduction, int64_t ignore_index) {
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) count += tp[i] != ignore_index;
  Tensor gi = zeros({N, C}, log_probs.dtype());
  Tensor g = grad_out.to(kFloat64).contiguous();
  const double* gp = g.data_ptr<double>();
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(log_probs.dtype(), "nll_loss_backward", [&] {
    scalar_t* q = gi.data_ptr<scalar_t>();
    for (int64_t i = 0; i < N; ++i) {
      if (tp[i] == ignore_index) continue;
      const double gv = reduction == Reduction::None ? gp[i]
                        : reduction == Reduction::Sum ? gp[0]
                                                      : gp[0] / static_cast<double>(count);
      q[i * C + tp[i]] = scalar_t(-gv);
    }
  });
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
