// ZeRO stage 1 (docs/design.md, distributed/optim/): which rank keeps the optimizer state of which
// parameter. A pure function, so the assignment can be tested without a process group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ember::distributed {

// Parameter i (numbered across the groups, in order) belongs to owner[i]; per_rank[r] lists rank
// r's parameters in ascending order, and per_rank_group[r][g] those of group g.
struct ParameterPartition {
  std::vector<int> owner;
  std::vector<std::vector<size_t>> per_rank;
  std::vector<std::vector<std::vector<size_t>>> per_rank_group;
  // Elements each rank owns (all dtypes together), for reports and the balance test.
  std::vector<int64_t> numel_per_rank;
};

// PyTorch's ZeroRedundancyOptimizer._partition_parameters: group by group, the parameters sorted
// by size, largest first (ties in their order), each to the rank with the fewest elements so far
// (ties to the lowest rank). The tally is kept per (dtype, device), so that each kind of parameter
// is balanced on its own (one tally, PyTorch's, when there is one kind). `groups[g]` holds group
// g's parameters. Throws on world < 1.
ParameterPartition partition_parameters(const std::vector<std::vector<Tensor>>& groups, int world);

}  // namespace ember::distributed
