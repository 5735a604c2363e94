// ZeRO stage 1 (docs/zero.md): the sharded step, the exchange of the updated parameters
// (parameter_exchange.h), and the consolidated state dict (Note [ZeRO state_dict layout]).
#include "distributed/optim/zero_redundancy_optimizer.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "distributed/collective_helpers.h"
#include "distributed/optim/state_dict_broadcast.h"
#include "tensor/autograd_interface.h"
#include "tensor/factories.h"

namespace ember::distributed {

namespace {
std::unique_ptr<optim::Optimizer> make_probe(const OptimizerFactory& factory,
                                             std::vector<optim::OptimizerParamGroup> groups) {
  EMBER_CHECK(factory != nullptr, "ZeroRedundancyOptimizer: the optimizer factory is empty");
  // Built over every parameter only to learn the defaults and fill in each group's options; an
  // optimizer allocates its state on the first step, so this costs no state memory.
  auto probe = factory(std::move(groups));
  EMBER_CHECK(probe != nullptr, "ZeroRedundancyOptimizer: the optimizer factory returned null");
  return probe;
}

std::vector<optim::OptimizerParamGroup> one_group(std::vector<Tensor> params) {
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(params));
  return groups;
}

// "state.<i>.<rest>" -> (i, rest); false for any other key.
bool split_state_key(const std::string& key, int64_t* index, std::string* rest) {
  static const std::string kHead = "state.";
  if (key.compare(0, kHead.size(), kHead) != 0) return false;
  const size_t dot = key.find('.', kHead.size());
  if (dot == std::string::npos || dot == kHead.size()) return false;
  const std::string num = key.substr(kHead.size(), dot - kHead.size());
  if (num.find_first_not_of("0123456789") != std::string::npos || num.size() > 9) return false;
  *index = std::stoll(num);
  *rest = key.substr(dot + 1);
  return true;
}
}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Tensor> params, const OptimizerFactory& factory,
                                                 ProcessGroupPtr group, ZeroRedundancyOptimizerOptions options)
    : ZeroRedundancyOptimizer(make_probe(factory, one_group(std::move(params))), factory, std::move(group),
                              options) {}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<optim::OptimizerParamGroup> groups,
                                                 const OptimizerFactory& factory, ProcessGroupPtr group,
                                                 ZeroRedundancyOptimizerOptions options)
    : ZeroRedundancyOptimizer(make_probe(factory, std::move(groups)), factory, std::move(group), options) {}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::unique_ptr<optim::Optimizer> probe,
                                                 const OptimizerFactory& factory, ProcessGroupPtr group,
                                                 ZeroRedundancyOptimizerOptions options)
    : Optimizer(probe->defaults().clone()), group_(std::move(group)), options_(options) {
  EMBER_CHECK(group_ != nullptr, "ZeroRedundancyOptimizer: the process group is null");
  param_groups_ = probe->param_groups();
  probe.reset();
  std::vector<std::vector<Tensor>> tensors;
  for (const auto& g : param_groups_) tensors.push_back(g.params());
  partition_ = partition_parameters(tensors, group_->size());
  const std::vector<Tensor> all = parameters();
  for (size_t i = 0; i < all.size(); ++i) owner_by_impl_[all[i].unsafe_impl()] = partition_.owner[i];
  // The local optimizer mirrors our groups (empty where this rank owns none of a group), so a
  // group index means the same in both and the options can be copied group by group.
  std::vector<optim::OptimizerParamGroup> local;
  const auto& mine = partition_.per_rank_group[group_->rank()];
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    std::vector<Tensor> shard;
    for (size_t i : mine[g]) shard.push_back(all[i]);
    local.emplace_back(std::move(shard), param_groups_[g].options().clone());
  }
  local_ = factory(std::move(local));
  EMBER_CHECK(local_ != nullptr, "ZeroRedundancyOptimizer: the optimizer factory returned null");
  exchange_.emplace(make_parameter_exchange(group_, "ZeroRedundancyOptimizer"));
}

void ZeroRedundancyOptimizer::sync_local_options() {
  auto& local_groups = local_->param_groups();
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    local_groups[g].set_options(param_groups_[g].options().clone());
  }
}

void ZeroRedundancyOptimizer::step() {
  const size_t total = partition_.owner.size();
  if (options_.overlap_with_ddp) {
    const size_t stepped = stepped_by_hook_.exchange(0);
    if (stepped > 0) {
      // The hook stepped and broadcast every bucket during backward (zero_step_hook.h).
      EMBER_CHECK(stepped == total, "ZeroRedundancyOptimizer (rank ", group_->rank(), "): the overlap hook ",
                  "stepped ", stepped, " of the ", total, " parameters in this backward; every parameter ",
                  "must be in the DDP module and get a gradient in every iteration");
      ++steps_taken_by_hook_;
      return;
    }
  }
  sync_local_options();
  local_->step();
  exchange_->exchange(parameters());
}

ParameterExchange ZeroRedundancyOptimizer::make_parameter_exchange(ProcessGroupPtr group, const char* caller) const {
  ParameterExchangeOptions o;
  o.mode = options_.parameter_exchange;
  o.bucket_bytes = options_.broadcast_bucket_bytes;
  o.caller = caller;
  return ParameterExchange([this](const Tensor& p) { return owner_of(p); }, std::move(group), o);
}

void ZeroRedundancyOptimizer::step_owned(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  std::vector<Tensor> mine, mine_grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (owner_of(params[i]) != group_->rank()) continue;
    mine.push_back(params[i]);
    mine_grads.push_back(grads.at(i));
  }
  sync_local_options();
  local_->step_parameters(mine, mine_grads);
}

int ZeroRedundancyOptimizer::owner_of(const Tensor& param) const {
  auto it = owner_by_impl_.find(param.unsafe_impl());
  return it == owner_by_impl_.end() ? -1 : it->second;
}

void ZeroRedundancyOptimizer::mark_stepped_by_hook(size_t count) { stepped_by_hook_ += count; }

int64_t ZeroRedundancyOptimizer::local_state_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& p : local_->parameters()) {
    const optim::ParamState* st = local_->state(p);
    if (st == nullptr) continue;
    for (const auto& kv : *st) bytes += kv.second.is_sparse() ? 0 : kv.second.nbytes();
  }
  return bytes;
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  const int rank = group_->rank(), world = group_->size();
  EMBER_CHECK(to >= 0 && to < world, "ZeroRedundancyOptimizer::consolidate_state_dict (rank ", rank,
              "): rank ", to, " is not in a group of ", world);
  // This rank's shard, renumbered from the local optimizer's indices to the global ones.
  nn::StateDict shard;
  for (auto& [key, t] : local_->state_dict()) {
    int64_t local_index = 0;
    std::string rest;
    if (!split_state_key(key, &local_index, &rest)) continue;
    const size_t global = partition_.per_rank[rank].at(local_index);
    shard.emplace_back("state." + std::to_string(global) + "." + rest, std::move(t));
  }
  std::map<int64_t, nn::StateDict> by_param;
  for (int r = 0; r < world; ++r) {
    // Every rank takes part in every broadcast; only `to` keeps what it receives.
    nn::StateDict got = broadcast_state_dict(*group_, shard, r, consolidate_bucket_bytes());
    if (rank != to) continue;
    for (auto& [key, t] : got) {
      int64_t index = 0;
      std::string rest;
      split_state_key(key, &index, &rest);
      by_param[index].emplace_back(key, std::move(t));
    }
  }
  consolidated_.reset();
  if (rank != to) return;
  // The groups (global ids and options) as the base writes them, then the state in index order.
  nn::StateDict full = Optimizer::state_dict();
  for (auto& [index, entries] : by_param) {
    for (auto& e : entries) full.push_back(std::move(e));
  }
  consolidated_ = std::move(full);
}

nn::StateDict ZeroRedundancyOptimizer::state_dict() const {
  EMBER_CHECK(consolidated_.has_value(), "ZeroRedundancyOptimizer::state_dict (rank ", group_->rank(),
              "): this rank holds no consolidated state; call consolidate_state_dict(to) on every rank ",
              "first, and state_dict() on rank `to`");
  return *consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const nn::StateDict& sd) {
  const int rank = group_->rank();
  const size_t total = partition_.owner.size();
  // Our groups' options, with the base's checks of group and parameter counts.
  nn::StateDict groups_only, local;
  for (const auto& [key, t] : sd) {
    if (key.compare(0, 13, "param_groups.") == 0) groups_only.emplace_back(key, t);
  }
  Optimizer::load_state_dict(groups_only);
  // The local optimizer's view: the same options, its own parameter count per group, and the
  // state of the parameters this rank owns, renumbered to its indices.
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const int64_t n = static_cast<int64_t>(partition_.per_rank_group[rank][g].size());
    std::vector<int64_t> ids(n);
    for (int64_t k = 0; k < n; ++k) ids[k] = k;
    local.emplace_back(prefix + "params", from_vector<int64_t>(ids, {n}));
    for (const auto& [key, t] : groups_only) {
      if (key.compare(0, prefix.size(), prefix) == 0 && key != prefix + "params") local.emplace_back(key, t);
    }
  }
  std::unordered_map<size_t, size_t> local_index;
  for (size_t k = 0; k < partition_.per_rank[rank].size(); ++k) local_index[partition_.per_rank[rank][k]] = k;
  for (const auto& [key, t] : sd) {
    int64_t index = 0;
    std::string rest;
    if (!split_state_key(key, &index, &rest)) {
      EMBER_CHECK(key.compare(0, 13, "param_groups.") == 0, "ZeroRedundancyOptimizer::load_state_dict (rank ",
                  rank, "): unexpected key '", key, "'");
      continue;
    }
    EMBER_CHECK(index < static_cast<int64_t>(total), "ZeroRedundancyOptimizer::load_state_dict (rank ", rank,
                "): '", key, "' refers to parameter ", index, " but the optimizer has ", total, " parameters");
    auto it = local_index.find(static_cast<size_t>(index));
    if (it == local_index.end()) continue;  // another rank's shard
    local.emplace_back("state." + std::to_string(it->second) + "." + rest, t);
  }
  try {
    local_->load_state_dict(local);
  } catch (const std::exception& e) {
    EMBER_THROW("ZeroRedundancyOptimizer::load_state_dict (rank ", rank, "): this rank's shard: ", e.what());
  }
  consolidated_.reset();
}

}  // namespace ember::distributed
