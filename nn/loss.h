// Loss modules over nn::functional: CrossEntropyLoss (fused log-softmax + NLL, optional label
// smoothing), NLLLoss, MSELoss. They take (input, target), so they are not single-input Modules.
#pragma once

#include "nn/functional.h"

namespace ember::nn {

class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::Mean, double label_smoothing = 0.0,
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

class NLLLoss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::Mean, int64_t ignore_index = -100)
      : reduction_(reduction), ignore_index_(ignore_index) {}
  Tensor operator()(const Tensor& log_probs, const Tensor& target) const {
    return nll_loss(log_probs, target, reduction_, ignore_index_);
  }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return functional::mse_loss(input, target, reduction_);
  }

 private:
  Reduction reduction_;
};

}  // namespace ember::nn
