// Umbrella header for ember's data pipeline: datasets, IDX/CIFAR readers, transforms, samplers
// (including DistributedSampler), the prefetching DataLoader, and character text corpora.
#pragma once

#include "data/cifar_reader.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/idx_reader.h"
#include "data/samplers.h"
#include "data/tensor_dataset.h"
#include "data/text_corpus.h"
#include "data/transforms.h"
