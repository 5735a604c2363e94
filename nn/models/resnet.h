// CIFAR-style ResNet of depth 6n+2 (He et al. 2016): a 3x3 stem, three stages of n BasicBlocks
// with widths w, 2w, 4w (stride 2 at stages 2 and 3; 1x1 projection shortcuts where the shape
// changes), global average pooling and a linear classifier. ResNet-20 is n = 3, w = 16.
#pragma once

#include <memory>

#include "nn/layers/batchnorm.h"
#include "nn/layers/container.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/module.h"

namespace ember::nn {

// torchvision's BasicBlock: relu(bn1(conv1(x))), then relu(bn2(conv2(.)) + shortcut(x)), 3x3
// convolutions; the shortcut is a 1x1 convolution and batch norm where stride or width changes.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator* gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Sequential> shortcut_;  // empty when the identity fits
};

// ResNet's shape: depth (6n + 2; ResNet-20 by default), first-stage width, input channels, classes.
struct ResNetOptions {
  int64_t depth = 20;        // 6n + 2
  int64_t width = 16;        // channels of the first stage
  int64_t in_channels = 1;   // 1 for (Fashion-)MNIST, 3 for CIFAR
  int64_t num_classes = 10;
};

// The ResNet described above: input [N, in_channels, H, W] -> logits [N, num_classes]. The
// constructor throws unless depth is 6n + 2 with n >= 1; forward throws on other input shapes.
class ResNet : public Module {
 public:
  explicit ResNet(const ResNetOptions& options = {}, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  const ResNetOptions& options() const { return options_; }

 private:
  ResNetOptions options_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<Sequential> layer1_, layer2_, layer3_;
  std::shared_ptr<Linear> fc_;
};

// A multi-layer perceptron: Linear + ReLU between the given sizes (no activation at the end).
std::shared_ptr<Sequential> make_mlp(const std::vector<int64_t>& sizes, Generator* gen = nullptr);

}  // namespace ember::nn
