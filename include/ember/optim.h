// ember's optimizers (SGD, Adam) and learning-rate schedules, and nanoGPT's GPT (nn/models/gpt.h),
// which is here rather than in <ember/nn.h> because it builds its own AdamW groups. Part of
// <ember/ember.h>.
#pragma once

#include "ember/nn.h"
#include "nn/models/gpt.h"
#include "optim/optim.h"
