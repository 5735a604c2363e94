#include "nn/layers/batchnorm.h"

#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, bool affine,
                         bool track_running_stats)
    : Module("BatchNorm2d"),
      num_features_(num_features),
      eps_(eps),
      momentum_(momentum),
      affine_(affine),
      track_running_stats_(track_running_stats) {
  EMBER_CHECK(num_features > 0, "BatchNorm2d: num_features must be positive, got ", num_features);
  if (affine) {
    register_parameter("weight", ones({num_features}));
    register_parameter("bias", zeros({num_features}));
  }
  if (track_running_stats) {
    register_buffer("running_mean", zeros({num_features}));
    register_buffer("running_var", ones({num_features}));
    register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNorm2d::redirect_forward(std::shared_ptr<Module> replacement) {
  EMBER_CHECK(replacement.get() != this, "BatchNorm2d::redirect_forward: a layer cannot redirect to itself");
  redirect_ = std::move(replacement);
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  if (redirect_) return redirect_->forward(input);
  return normalise(input, batch_norm);
}

Tensor BatchNorm2d::forward_relu(const Tensor& input, const Tensor& residual) {
  if (redirect_) {
    Tensor out = redirect_->forward(input);
    if (residual.defined()) out.add_(residual);
    return relu_(out);
  }
  return normalise(input, [&](const Tensor& x, const Tensor& w, const Tensor& b,
                              const Tensor& rm, const Tensor& rv, bool training, double momentum,
                              double eps) {
    return batch_norm_relu(x, w, b, rm, rv, training, momentum, eps, residual);
  });
}

template <typename Op>
Tensor BatchNorm2d::normalise(const Tensor& input, const Op& op) {
  EMBER_CHECK(input.defined() && input.dim() == 4 && input.size(1) == num_features_,
              "BatchNorm2d: expected input [N, ", num_features_, ", H, W], got ", input.describe());
  const bool use_batch_stats = is_training() || !track_running_stats_;
  Tensor rm = track_running_stats_ ? buffer("running_mean") : Tensor();
  Tensor rv = track_running_stats_ ? buffer("running_var") : Tensor();
  if (is_training() && track_running_stats_) {
    NoGradGuard g;
    add_(buffer("num_batches_tracked"), 1);
  }
  return op(input, affine_ ? param("weight") : Tensor(), affine_ ? param("bias") : Tensor(), rm, rv,
            use_batch_stats, momentum_, eps_);
}

std::string BatchNorm2d::extra_repr() const {
  return detail::str_cat(num_features_, ", eps=", eps_, ", momentum=", momentum_,
                         ", affine=", affine_ ? "true" : "false",
                         ", track_running_stats=", track_running_stats_ ? "true" : "false");
}

}  // namespace ember::nn
