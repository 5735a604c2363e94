// DESIGN.md steps 1-13: the prefix every DDP error starts with, "DistributedDataParallel (rank N): "
// (PyTorch's REDUCER_CHECK). Used inside DistributedDataParallel's and the Reducer's members, which
// both have ddp_rank(); macros, so the message is built only when the check fails.
#pragma once

#include "tensor/error.h"

#define DDP_MESSAGE(...) \
  ::ember::detail::str_cat("DistributedDataParallel (rank ", ddp_rank(), "): ", __VA_ARGS__)
#define DDP_CHECK(cond, ...) EMBER_CHECK(cond, "DistributedDataParallel (rank ", ddp_rank(), "): ", __VA_ARGS__)
#define DDP_THROW(...) EMBER_THROW("DistributedDataParallel (rank ", ddp_rank(), "): ", __VA_ARGS__)
