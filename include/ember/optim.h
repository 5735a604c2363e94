// ember's optimizers (SGD, Adam) and learning-rate schedules. Part of <ember/ember.h>.
#pragma once

#include "ember/nn.h"
#include "optim/optim.h"
