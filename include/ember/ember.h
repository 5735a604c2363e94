// The whole of ember for a program of one's own: #include <ember/ember.h>, link ember (Bazel:
// //:ember; CMake: find_package(ember) and ember::ember; pkg-config: ember). The narrower headers
// beside this one each bring one layer and what it builds on, as libtorch's do.
#pragma once

#include "ember/autograd.h"
#include "ember/data.h"
#include "ember/distributed.h"
#include "ember/nn.h"
#include "ember/optim.h"
#include "ember/tensor.h"
