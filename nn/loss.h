// Loss modules over nn::functional: CrossEntropyLoss (fused log-softmax + NLL, optional label
// smoothing), NLLLoss, MSELoss. They take (input, target), so they are not single-input Modules.
#pragma once

#include "nn/functional.h"

namespace ember::nn {

// PyTorch's torch.nn.CrossEntropyLoss: loss(logits [N, C], int64 target [N]) = nll_loss of
// log_softmax, with optional label smoothing; targets equal to ignore_index contribute nothing.
class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::kMean, double label_smoothing = 0.0,
                            int64_t ignore_index = -100)
      : reduction_(reduction), label_smoothing_(label_smoothing), ignore_index_(ignore_index) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return functional::cross_entropy(input, target, reduction_, label_smoothing_, ignore_index_);
  }

 private:
  Reduction reduction_;
  double label_smoothing_;
  int64_t ignore_index_;
};

// PyTorch's torch.nn.NLLLoss: loss(log_probs [N, C], int64 target [N]); targets equal to
// ignore_index contribute nothing.
class NLLLoss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::kMean, int64_t ignore_index = -100)
      : reduction_(reduction), ignore_index_(ignore_index) {}
  Tensor operator()(const Tensor& log_probs, const Tensor& target) const {
    return nll_loss(log_probs, target, reduction_, ignore_index_);
  }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

// PyTorch's torch.nn.MSELoss: (input - target)^2 elementwise, then mean, sum or nothing by
// `reduction`; throws unless input and target have the same shape.
class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::kMean) : reduction_(reduction) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return functional::mse_loss(input, target, reduction_);
  }

 private:
  Reduction reduction_;
};

}  // namespace ember::nn
