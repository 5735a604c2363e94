// Shared by the ZeRO mpirun suites: a trainer that runs DDP with either the unsharded optimizer,
// ZeRO, or ZeRO overlapped with backward, on this rank's shard of deterministic global batches.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/optim/zero_redundancy_optimizer.h"
#include "distributed/optim/zero_step_hook.h"
#include "optim/lr_scheduler.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {

enum class Kind { kSgdMomentum, kAdam, kAdamW };
enum class Mode { kUnsharded, kZero, kZeroOverlap };

inline const char* kind_name(Kind k) {
  return k == Kind::kSgdMomentum ? "SgdMomentum" : k == Kind::kAdam ? "Adam" : "AdamW";
}

// Two groups with different options: the weights (weight decay) and the biases (none), so the
// per-group bookkeeping (options, empty local groups) is exercised.
inline std::vector<optim::OptimizerParamGroup> two_groups(nn::Module& m, Kind kind) {
  std::vector<Tensor> weights, biases;
  for (const auto& [name, p] : m.named_parameters()) (p.dim() > 1 ? weights : biases).push_back(p);
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(weights));
  if (kind == Kind::kSgdMomentum) {
    groups.emplace_back(std::move(biases), optim::SGDOptions(0.08).momentum(0.9));
  } else if (kind == Kind::kAdam) {
    groups.emplace_back(std::move(biases), optim::AdamOptions(2e-2));
  } else {
    groups.emplace_back(std::move(biases), optim::AdamWOptions(2e-2).weight_decay(0));
  }
  return groups;
}

inline OptimizerFactory factory(Kind kind) {
  if (kind == Kind::kSgdMomentum) {
    return [](std::vector<optim::OptimizerParamGroup> g) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<optim::SGD>(std::move(g), optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
    };
  }
  if (kind == Kind::kAdam) {
    return [](std::vector<optim::OptimizerParamGroup> g) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<optim::Adam>(std::move(g), optim::AdamOptions(1e-2).weight_decay(1e-3).amsgrad(true));
    };
  }
  return [](std::vector<optim::OptimizerParamGroup> g) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::AdamW>(std::move(g), optim::AdamWOptions(1e-2).weight_decay(0.05));
  };
}

// Layer sizes chosen so the partition is uneven at 2, 3 and 4 ranks; `tiny` has two parameters,
// so at 3 and 4 ranks some ranks own nothing.
inline std::shared_ptr<nn::Module> zero_model(bool tiny) {
  Generator g(1234);
  return tiny ? nn::make_mlp({6, 4}, &g) : nn::make_mlp({6, 40, 24, 16, 4}, &g);
}

struct Trainer {
  ProcessGroupPtr pg;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;  // declared before ddp: the hook refers to it
  std::shared_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::StepLR> sched;
  int64_t per_rank = 4;

  // `zero_options` for the ZeRO modes (overlap_with_ddp is set from `mode`).
  Trainer(ProcessGroupPtr group, Kind kind, Mode mode, bool tiny = false, const nn::StateDict* model_state = nullptr,
          ZeroRedundancyOptimizerOptions zero_options = {})
      : pg(std::move(group)), model(zero_model(tiny)) {
    if (model_state != nullptr) model->load_state_dict(*model_state);
    DDPOptions o;
    o.process_group = pg;
    o.bucket_cap_mb = 0.002;  // several buckets, so the overlap hook runs more than once
    ddp = std::make_shared<DistributedDataParallel>(model, o);
    if (mode == Mode::kUnsharded) {
      opt = factory(kind)(two_groups(*model, kind));
    } else {
      zero_options.overlap_with_ddp = mode == Mode::kZeroOverlap;
      opt = std::make_unique<ZeroRedundancyOptimizer>(two_groups(*model, kind), factory(kind), pg, zero_options);
      if (mode == Mode::kZeroOverlap) ddp->register_comm_hook(std::make_unique<ZeroStepCommHook>(*zero()));
    }
    sched = std::make_unique<optim::StepLR>(*opt, 2, 0.5);
  }
  ZeroRedundancyOptimizer* zero() { return dynamic_cast<ZeroRedundancyOptimizer*>(opt.get()); }

  void train(int first_step, int steps) {
    const int rank = pg->rank(), world = pg->size();
    for (int step = first_step; step < first_step + steps; ++step) {
      opt->zero_grad();
      auto batch = random_batches({6}, 4)(step, world * per_rank);
      auto shard = rows(batch, rank * per_rank, per_rank);
      nn::functional::cross_entropy(ddp->forward(shard.first), shard.second).backward();
      opt->step();
      sched->step();
    }
  }
  // model., optimizer. and scheduler. entries: what a checkpoint holds. The optimizer's must have
  // been consolidated first when it is a ZeRO one.
  nn::StateDict checkpoint() const {
    nn::StateDict out;
    for (auto& kv : model->state_dict()) out.emplace_back("model." + kv.first, kv.second);
    for (auto& kv : opt->state_dict()) out.emplace_back("optimizer." + kv.first, kv.second);
    for (auto& kv : sched->state_dict()) out.emplace_back("scheduler." + kv.first, kv.second);
    return out;
  }
};

inline nn::StateDict with_prefix_removed(const nn::StateDict& sd, const std::string& prefix) {
  nn::StateDict out;
  for (const auto& kv : sd) {
    if (kv.first.compare(0, prefix.size(), prefix) == 0) out.emplace_back(kv.first.substr(prefix.size()), kv.second);
  }
  return out;
}

// Bit-for-bit equality of two parameter lists, naming the first that differs.
inline ::testing::AssertionResult bitwise_equal(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (!equal(got[i], want[i])) {
      const double diff = max(abs(sub(got[i].to(kFloat64), want[i].to(kFloat64)))).item<double>();
      return ::testing::AssertionFailure() << "parameter " << i << " " << got[i].describe()
                                           << " differs from the unsharded optimizer's by up to " << diff;
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::string tmp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

}  // namespace ember::distributed::testing
