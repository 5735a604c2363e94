// ember's data pipeline: datasets (in-memory tensors, IDX and CIFAR files), transforms, samplers
// (DistributedSampler among them) and the DataLoader. Part of <ember/ember.h>.
#pragma once

#include "data/data.h"
#include "ember/tensor.h"
