// ember's autograd: the engine behind Tensor::backward, gradient accumulators and their hooks,
// no-grad scopes and gradcheck. Part of <ember/ember.h>.
#pragma once

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "ember/tensor.h"
