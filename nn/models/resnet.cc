#include "nn/models/resnet.h"

#include "nn/layers/simple.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember::nn {

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator* gen)
    : Module("BasicBlock") {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_planes, planes, 3, stride, 1, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(planes, planes, 3, 1, 1, false, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  shortcut_ = register_module("shortcut", std::make_shared<Sequential>());
  if (stride != 1 || in_planes != planes) {
    shortcut_->push_back(std::make_shared<Conv2d>(in_planes, planes, 1, stride, 0, false, gen));
    shortcut_->push_back(std::make_shared<BatchNorm2d>(planes));
  }
}

// torchvision's BasicBlock: relu(bn1(conv1(x))), then relu(bn2(conv2(.)) + shortcut(x)). The ReLUs
// and the residual addition run inside batch norm's own pass (BatchNorm2d::forward_relu, Note
// [Batch norm + ReLU]), with the bits of batch norm, out += identity and ReLU(inplace=True).
Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = bn1_->forward_relu(conv1_->forward(x));
  return bn2_->forward_relu(conv2_->forward(out), shortcut_->size() ? shortcut_->forward(x) : x);
}

ResNet::ResNet(const ResNetOptions& o, Generator* gen) : Module("ResNet"), options_(o) {
  EMBER_CHECK(o.depth >= 8 && (o.depth - 2) % 6 == 0, "ResNet: depth must be 6n+2 (20, 32, 44, 56, ",
              "110, ...), got ", o.depth);
  const int64_t n = (o.depth - 2) / 6;
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(o.in_channels, o.width, 3, 1, 1, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(o.width));
  int64_t in_planes = o.width;
  auto make_stage = [&](int64_t planes, int64_t stride) {
    auto stage = std::make_shared<Sequential>();
    for (int64_t i = 0; i < n; ++i) {
      stage->push_back(std::make_shared<BasicBlock>(in_planes, planes, i == 0 ? stride : 1, gen));
      in_planes = planes;
    }
    return stage;
  };
  layer1_ = register_module("layer1", make_stage(o.width, 1));
  layer2_ = register_module("layer2", make_stage(o.width * 2, 2));
  layer3_ = register_module("layer3", make_stage(o.width * 4, 2));
  fc_ = register_module("fc", std::make_shared<Linear>(o.width * 4, o.num_classes, true, gen));
}

Tensor ResNet::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == options_.in_channels, "ResNet: expected input [N, ",
              options_.in_channels, ", H, W], got ", x.describe());
  Tensor out = bn1_->forward_relu(conv1_->forward(x));
  out = layer3_->forward(layer2_->forward(layer1_->forward(out)));
  out = adaptive_avg_pool2d(out, {1, 1}).flatten(1);
  return fc_->forward(out);
}

std::shared_ptr<Sequential> make_mlp(const std::vector<int64_t>& sizes, Generator* gen) {
  EMBER_CHECK(sizes.size() >= 2, "make_mlp: need at least input and output sizes");
  auto mlp = std::make_shared<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    mlp->push_back(std::make_shared<Linear>(sizes[i], sizes[i + 1], true, gen));
    if (i + 2 < sizes.size()) mlp->push_back(std::make_shared<ReLU>());
  }
  return mlp;
}

}  // namespace ember::nn
