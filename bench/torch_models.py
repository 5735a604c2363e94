"""The PyTorch twins of ember's benchmark models (nn/models/resnet.{h,cc}), layer for layer.

resnet(depth, width): CIFAR-style ResNet of depth 6n+2 -- a 3x3 stem (no bias) + BN + ReLU, three
stages of n BasicBlocks with widths w, 2w, 4w (stride 2 at stages 2 and 3, 1x1 projection + BN
shortcuts where the shape changes), global average pooling and a Linear classifier.
mlp_sizes(sizes): Linear layers through the given widths (e.g. the wide 784-4096-4096-10 MLP).
mlp(layers, width): `layers` Linear layers of width x width with ReLU between them, the last one
to 10 classes -- the "many small parameters" model of the bucket-size experiment (ddp_bench.cc).
"""
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, 0, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        # In place, as torchvision's BasicBlock (ReLU(inplace=True), out += identity) and ember's.
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out, inplace=True)


class ResNet(nn.Module):
    def __init__(self, depth=20, width=16, in_channels=1, num_classes=10):
        super().__init__()
        assert depth >= 8 and (depth - 2) % 6 == 0, "depth must be 6n+2"
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.in_planes = width
        self.layer1 = self._stage(width, 1, n)
        self.layer2 = self._stage(width * 2, 2, n)
        self.layer3 = self._stage(width * 4, 2, n)
        self.fc = nn.Linear(width * 4, num_classes)

    def _stage(self, planes, stride, n):
        blocks = []
        for i in range(n):
            blocks.append(BasicBlock(self.in_planes, planes, stride if i == 0 else 1))
            self.in_planes = planes
        return nn.Sequential(*blocks)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


def resnet(depth=20, width=16):
    return ResNet(depth, width)


def mlp(layers=200, width=64, num_classes=10):
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, num_classes if i == layers - 1 else width))
        if i + 1 < layers:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def mlp_sizes(sizes):
    """Linear layers sizes[0] -> sizes[1] -> ... with ReLU between them (nn::make_mlp's twin)."""
    mods = []
    for i in range(len(sizes) - 1):
        mods.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)
