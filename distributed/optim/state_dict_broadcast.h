// ZeRO stage 1 (docs/design.md, distributed/optim/): sending an nn::StateDict of any keys, dtypes and
// shapes from one rank to all, for consolidate_state_dict (PyTorch broadcasts pickled objects).
#pragma once

#include "distributed/process_group.h"
#include "nn/state_dict.h"

namespace ember::distributed {

// Collective: every rank returns `root`'s `sd` (dense tensors; the others' `sd` is ignored). One
// broadcast of the header's length, one of the header (keys, dtypes, shapes), then the tensors,
// coalesced per dtype into buckets of at most `bucket_bytes`.
nn::StateDict broadcast_state_dict(ProcessGroup& group, const nn::StateDict& sd, int root,
                                   int64_t bucket_bytes = 64LL * 1024 * 1024);

}  // namespace ember::distributed
