// Linear: y = x W^T + b with PyTorch's default init (kaiming_uniform a=sqrt(5), bias U(+-1/sqrt(fan_in))).
#pragma once

#include "nn/module.h"
#include "tensor/generator.h"

namespace ember::nn {

// PyTorch's torch.nn.Linear: y = x W^T + b over the last dim of x [..., in_features], with weight
// [out_features, in_features] and an optional bias [out_features]. forward throws on other shapes.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator* gen = nullptr);
  Tensor& weight() { return param("weight"); }
  Tensor bias() { return has_bias_ ? param("bias") : Tensor(); }

 private:
  int64_t in_features_, out_features_;
  bool has_bias_;
};

}  // namespace ember::nn
