#include "nn/utils/clip_grad.h"

#include <cmath>
#include <limits>

#include "tensor/all.h"

namespace ember::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, const ClipGradNormOptions& options) {
  EMBER_CHECK(max_norm >= 0 && !std::isnan(max_norm), "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  const double p = options.norm_type;
  EMBER_CHECK(p > 0, "clip_grad_norm_: norm_type must be positive (or infinity), got ", p);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& g = parameters[i].grad();
    if (!g.defined()) continue;
    EMBER_CHECK(!g.is_sparse(), "clip_grad_norm_: parameter ", i, " has a sparse gradient (", g.describe(),
                "), which clip_grad_norm_ does not take");
    EMBER_CHECK(grads.empty() || (g.dtype() == grads[0].dtype() && g.device() == grads[0].device()),
                "clip_grad_norm_: parameter ", i, "'s gradient is ", g.describe(), " but the first one's is ",
                grads[0].describe(), ": the gradients must share a dtype and device");
    grads.push_back(g);
  }
  if (grads.empty()) return zeros({});
  const bool inf = std::isinf(p);
  std::vector<Tensor> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) {
    if (inf) {
      norms.push_back(max(abs(g)));
    } else if (p == 2.0) {
      norms.push_back(sqrt(sum(mul(g, g))));
    } else {
      norms.push_back(pow(sum(pow(abs(g), Scalar(p))), Scalar(1.0 / p)));
    }
  }
  const Tensor all = stack(norms);
  const Tensor total = inf ? max(all) : (p == 2.0 ? sqrt(sum(mul(all, all))) : pow(sum(pow(all, Scalar(p))), Scalar(1.0 / p)));
  const double total_value = total.to(kCPU).to(kFloat64).item<double>();
  EMBER_CHECK(!options.error_if_nonfinite || std::isfinite(total_value), "clip_grad_norm_: the total norm of order ",
              p, " of the gradients of ", grads.size(), " parameters is ", total_value,
              ", so they cannot be clipped (error_if_nonfinite)");
  // PyTorch multiplies by the clamped coefficient always (1 when the norm is within max_norm).
  const double coef = std::min(1.0, max_norm / (total_value + 1e-6));
  for (const Tensor& g : grads) g.mul_(Scalar(coef));
  return total;
}

}  // namespace ember::nn::utils
