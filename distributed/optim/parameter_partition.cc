// ZeRO stage 1: the size-balanced greedy assignment of parameters to ranks.
#include "distributed/optim/parameter_partition.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <utility>

namespace ember::distributed {

ParameterPartition partition_parameters(const std::vector<std::vector<Tensor>>& groups, int world) {
  EMBER_CHECK(world >= 1, "partition_parameters: the world size must be positive, got ", world);
  ParameterPartition out;
  out.per_rank.assign(world, {});
  out.per_rank_group.assign(world, std::vector<std::vector<size_t>>(groups.size()));
  out.numel_per_rank.assign(world, 0);
  // One running tally per kind of parameter, carried across groups as PyTorch's `sizes` is.
  std::map<std::string, std::vector<int64_t>> tally;
  size_t first = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& params = groups[g];
    std::vector<size_t> order(params.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
    for (size_t k : order) {
      const Tensor& p = params[k];
      auto& sizes = tally.try_emplace(std::string(dtype_name(p.dtype())) + "@" + p.device().str(),
                                      std::vector<int64_t>(world, 0))
                        .first->second;
      const int rank = static_cast<int>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
      sizes[rank] += p.numel();
      out.numel_per_rank[rank] += p.numel();
      out.per_rank_group[rank][g].push_back(first + k);
    }
    first += params.size();
  }
  out.owner.assign(first, -1);
  for (int r = 0; r < world; ++r) {
    for (auto& in_group : out.per_rank_group[r]) {
      std::sort(in_group.begin(), in_group.end());
      for (size_t i : in_group) {
        out.owner[i] = r;
        out.per_rank[r].push_back(i);
      }
    }
  }
  return out;
}

}  // namespace ember::distributed
