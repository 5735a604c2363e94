// Umbrella header for nn: Module, layers, losses, init, functional, models, utils.
#pragma once

#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layers/batchnorm.h"
#include "nn/layers/container.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/simple.h"
#include "nn/loss.h"
#include "nn/models/resnet.h"
#include "nn/module.h"
#include "nn/utils/clip_grad.h"
