// docs/design.md steps 1-13: the prefix every DDP error starts with, "DistributedDataParallel (rank N): "
// (PyTorch's REDUCER_CHECK), and DDP_INTERNAL_ASSERT for invariants only a bug in DDP can break
// (PyTorch's TORCH_INTERNAL_ASSERT; tests/distributed/ddp/reducer_invariants_test.cc breaks each).
// Used inside DistributedDataParallel's and the Reducer's members, which both have ddp_rank();
// macros, so the message is built only when the check fails.
#pragma once

#include "tensor/error.h"

#define DDP_MESSAGE(...) \
  ::ember::detail::str_cat("DistributedDataParallel (rank ", ddp_rank(), "): ", __VA_ARGS__)
#define DDP_CHECK(cond, ...) EMBER_CHECK(cond, "DistributedDataParallel (rank ", ddp_rank(), "): ", __VA_ARGS__)
#define DDP_THROW(...) EMBER_THROW("DistributedDataParallel (rank ", ddp_rank(), "): ", __VA_ARGS__)
#define DDP_INTERNAL_ASSERT(cond, ...)                                                         \
  EMBER_CHECK(cond, "DistributedDataParallel (rank ", ddp_rank(), "): internal assert '" #cond \
              "' failed (", __VA_ARGS__, "); this is a bug in ember's DDP, please report it")
