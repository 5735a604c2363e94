// ZeRO stage 1: Note [ZeRO parameters by allgather].
#include "distributed/optim/parameter_allgather.h"

#include <algorithm>

#include "distributed/utils.h"
#include "tensor/autograd_interface.h"
#include "tensor/factories.h"

namespace ember::distributed {

ParameterAllgather::ParameterAllgather(const std::vector<Tensor>& params,
                                       const std::function<int(const Tensor&)>& owner_of, const ProcessGroup& group)
    : rank_(group.rank()), owned_by_rank_(group.size()) {
  if (params.empty()) return;
  check_same_dtype_device(params, "ZeroRedundancyOptimizer (allgather of the parameters)");
  std::vector<int64_t> numel(group.size(), 0);
  for (const Tensor& p : params) {
    const int owner = owner_of(p);
    if (owner < 0) continue;
    EMBER_CHECK(owner < group.size(), "ZeroRedundancyOptimizer (rank ", rank_, "): parameter ", p.describe(),
                " is owned by rank ", owner, ", outside the group of ", group.size());
    owned_by_rank_[owner].push_back(p);
    numel[owner] += p.numel();
  }
  slot_ = *std::max_element(numel.begin(), numel.end());
  if (slot_ == 0) return;
  NoGradGuard no_grad;
  const TensorOptions options(params[0].dtype(), params[0].device());
  input_ = zeros({slot_}, options);
  int64_t offset = 0;
  for (const Tensor& p : owned_by_rank_[rank_]) {
    if (p.numel() > 0) input_.narrow(0, offset, p.numel()).view(p.sizes()).copy_(p);
    offset += p.numel();
  }
  output_ = empty({slot_ * group.size()}, options);
}

WorkPtr ParameterAllgather::start(ProcessGroup& group) {
  if (slot_ == 0) return nullptr;
  return group.allgather_base(output_, input_);
}

void ParameterAllgather::finish() const {
  if (slot_ == 0) return;
  NoGradGuard no_grad;
  for (size_t r = 0; r < owned_by_rank_.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    int64_t offset = static_cast<int64_t>(r) * slot_;
    for (const Tensor& p : owned_by_rank_[r]) {
      if (p.numel() > 0) p.copy_(output_.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }
}

}  // namespace ember::distributed
