// ember's neural-network modules: Module, the layers (Linear, Conv2d, BatchNorm2d, ...), losses,
// the functional ops (attention among them), initialisation, the ResNet and GPT models, and
// checkpoints (safetensors).
// Part of <ember/ember.h>.
#pragma once

#include "ember/autograd.h"
#include "nn/checkpoint.h"
#include "nn/models/gpt.h"
#include "nn/nn.h"
