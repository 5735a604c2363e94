// ember's neural-network modules: Module, the layers (Linear, Conv2d, BatchNorm2d, ...), losses,
// the functional ops, initialisation, ResNet and MLP builders, and checkpoints (safetensors).
// Part of <ember/ember.h>.
#pragma once

#include "ember/autograd.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
