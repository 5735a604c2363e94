// Umbrella header for optim/: the Optimizer base, SGD, Adam/AdamW and the LR schedulers.
#pragma once

#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"
