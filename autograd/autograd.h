// Umbrella header for autograd: the engine, hooks, graph traversal, grad mode.
#pragma once

#include "autograd/accumulate_grad.h"
#include "autograd/engine.h"
#include "autograd/graph_traversal.h"
#include "autograd/node.h"
#include "autograd/variable.h"
#include "tensor/autograd_interface.h"
