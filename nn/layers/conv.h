// Conv2d over NCHW with stride, padding, dilation and groups (PyTorch's default init).
#pragma once

#include "nn/module.h"
#include "tensor/generator.h"
#include "tensor/nn_ops.h"

namespace ember::nn {

// Conv2d's arguments, named as torch.nn.Conv2d's and with its defaults (in_channels, out_channels
// and kernel_size have none).
struct Conv2dOptions {
  int64_t in_channels, out_channels;
  Pair kernel_size;
  Pair stride{1, 1};
  Pair padding{0, 0};
  Pair dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
};

// PyTorch's torch.nn.Conv2d: weight [out, in / groups, kH, kW] and optional bias [out], initialised
// as PyTorch's. The constructor throws unless the channel counts are positive and divide by groups.
class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& options, Generator* gen = nullptr);
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator* gen = nullptr);
  Tensor& weight() { return param("weight"); }
  const Conv2dOptions& options() const { return options_; }

 private:
  Conv2dOptions options_;
};

}  // namespace ember::nn
