// BatchNorm2d: per-channel normalisation with affine weight/bias and running_mean/var and
// num_batches_tracked buffers (momentum convention and eval behaviour as in PyTorch).
#pragma once

#include "nn/module.h"

namespace ember::nn {

// PyTorch's torch.nn.BatchNorm2d over input [N, C, H, W] (forward throws on other shapes): training
// normalises with the batch's statistics and updates the running ones; eval uses the running ones
// (the batch's when track_running_stats is false).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true, bool track_running_stats = true);
  Tensor forward(const Tensor& input) override;
  // relu(forward(input) + residual) (residual optional), the same values and gradients, in one
  // pass over the data where this layer is not redirected (batch_norm_relu, Note [Batch norm +
  // ReLU] in tensor/batch_norm.cc).
  Tensor forward_relu(const Tensor& input, const Tensor& residual = Tensor());
  std::string extra_repr() const override;

  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  bool affine() const { return affine_; }
  bool track_running_stats() const { return track_running_stats_; }
  // From now on forward() runs `replacement` instead. Note [Converted BatchNorm]: after a layer was
  // replaced in its parent (distributed's convert_sync_batchnorm), a model that still calls it
  // through its own typed pointer (ResNet's bn1_) reaches the replacement.
  void redirect_forward(std::shared_ptr<Module> replacement);

 private:
  // op(input, weight, bias, running_mean, running_var, training, momentum, eps) on this layer's
  // parameters and buffers: batch_norm, or batch_norm_relu with its residual bound.
  template <typename Op>
  Tensor normalise(const Tensor& input, const Op& op);

  std::shared_ptr<Module> redirect_;
  int64_t num_features_;
  double eps_, momentum_;
  bool affine_, track_running_stats_;
};

}  // namespace ember::nn
