// Shared harness for the DDP suites: run N DDP ranks on shards of a global batch and, on every rank,
// the same training in one process on the whole batch; then compare parameters.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "distributed/ddp/distributed_data_parallel.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/all.h"
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {

// Models can read which shard they are processing (for rank-dependent unused branches).
struct ShardAware {
  int shard = 0;
};

struct Scenario {
  std::function<std::shared_ptr<nn::Module>(uint64_t seed)> make_model;
  // Inputs and int64 targets for the global batch of step `step` (rows = world * per_rank).
  std::function<std::pair<Tensor, Tensor>(int step, int64_t rows)> make_batch;
  std::function<Tensor(const Tensor& out, const Tensor& target)> loss = [](const Tensor& out,
                                                                          const Tensor& target) {
    return nn::functional::cross_entropy(out, target);
  };
  DDPOptions options;
  int64_t per_rank = 4;
  int steps = 5;
  int micro_batches = 1;     // >1: the first micro_batches-1 run under no_sync
  double lr = 0.1;
  double momentum = 0.9;
  bool sparse = false;       // plain SGD (sparse gradients support no momentum with weight decay)
  bool eval_mode = false;
  // Runs on the DDP module right after construction (e.g. to register a comm hook).
  std::function<void(DistributedDataParallel&)> setup;
  // Where train_ddp puts the model and its shards (the reference always trains on the CPU).
  Device device = kCPU;
};

// Rows [first, first + n) of a batch.
inline std::pair<Tensor, Tensor> rows(const std::pair<Tensor, Tensor>& b, int64_t first, int64_t n) {
  return {b.first.narrow(0, first, n), b.second.narrow(0, first, n)};
}

inline void set_shard(nn::Module& m, int shard) {
  if (auto* s = dynamic_cast<ShardAware*>(&m)) s->shard = shard;
}

// Trains a single-process copy on the whole global batch; the loss of each micro-batch is the mean
// over ranks of the per-shard losses, which is what DDP's gradient averaging computes.
inline std::vector<Tensor> reference_parameters(const Scenario& sc, int world) {
  auto model = sc.make_model(1234);
  if (sc.eval_mode) model->eval();
  optim::SGD opt(model->parameters(), optim::SGDOptions(sc.lr).momentum(sc.sparse ? 0.0 : sc.momentum));
  for (int step = 0; step < sc.steps; ++step) {
    opt.zero_grad();
    for (int mb = 0; mb < sc.micro_batches; ++mb) {
      auto batch = sc.make_batch(step * sc.micro_batches + mb, world * sc.per_rank);
      Tensor total;
      for (int r = 0; r < world; ++r) {
        set_shard(*model, r);
        auto shard = rows(batch, r * sc.per_rank, sc.per_rank);
        Tensor l = div(sc.loss(model->forward(shard.first), shard.second), static_cast<double>(world));
        total = total.defined() ? add(total, l) : l;
      }
      total.backward();
    }
    opt.step();
  }
  return model->parameters();
}

// The same training with DDP on this rank's shard. Ranks start from different weights on purpose:
// DDP's constructor must broadcast rank 0's.
inline std::shared_ptr<DistributedDataParallel> train_ddp(const Scenario& sc, int rank, int world) {
  auto model = sc.make_model(rank == 0 ? 1234 : 1234 + 17 * rank);
  if (sc.eval_mode) model->eval();
  if (!sc.device.is_cpu()) model->to(sc.device);
  set_shard(*model, rank);
  auto ddp = std::make_shared<DistributedDataParallel>(model, sc.options);
  if (sc.setup) sc.setup(*ddp);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(sc.lr).momentum(sc.sparse ? 0.0 : sc.momentum));
  for (int step = 0; step < sc.steps; ++step) {
    opt.zero_grad();
    for (int mb = 0; mb < sc.micro_batches; ++mb) {
      auto batch = sc.make_batch(step * sc.micro_batches + mb, world * sc.per_rank);
      auto shard = rows(batch, rank * sc.per_rank, sc.per_rank);
      if (!sc.device.is_cpu()) shard = {shard.first.to(sc.device), shard.second.to(sc.device)};
      if (mb + 1 < sc.micro_batches) {
        auto guard = ddp->no_sync();
        sc.loss(ddp->forward(shard.first), shard.second).backward();
      } else {
        sc.loss(ddp->forward(shard.first), shard.second).backward();
      }
    }
    opt.step();
  }
  return ddp;
}

// Every rank holds bit-identical parameters (each compared with rank 0's, broadcast).
inline ::testing::AssertionResult ranks_agree(ProcessGroup& group, const std::vector<Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor mine = params[i].detach().clone();
    std::vector<Tensor> v{mine.clone()};
    group.broadcast(v)->wait();
    if (!equal(mine, v[0])) return ::testing::AssertionFailure() << "parameter " << i << " differs from rank 0's";
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult parameters_match(const std::vector<Tensor>& got,
                                                   const std::vector<Tensor>& want, double rtol,
                                                   double atol = 1e-6) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " parameters vs " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const Tensor g = got[i].to(want[i].device());  // a device run against the CPU reference
    if (!allclose(g, want[i], rtol, atol)) {
      Tensor diff = max(abs(sub(g.to(kFloat64), want[i].to(kFloat64))));
      return ::testing::AssertionFailure() << "parameter " << i << " " << got[i].describe()
                                           << " differs from the single-process run by up to "
                                           << diff.item<double>();
    }
  }
  return ::testing::AssertionSuccess();
}

// Deterministic batches from a generator seeded by the step.
inline std::function<std::pair<Tensor, Tensor>(int, int64_t)> random_batches(Shape item, int64_t classes) {
  return [item, classes](int step, int64_t rows) {
    Generator g(1000 + step);
    Shape s{rows};
    s.insert(s.end(), item.begin(), item.end());
    return std::make_pair(randn(s, &g), randint(0, classes, {rows}, &g));
  };
}

// One step of the single-process reference: the mean over the `world` shards of
// shard_loss(shard), one backward per shard, then the optimizer step (what DDP's averaging computes).
inline void reference_step(optim::Optimizer& opt, int world, const std::function<Tensor(int shard)>& shard_loss) {
  opt.zero_grad();
  for (int r = 0; r < world; ++r) div(shard_loss(r), static_cast<double>(world)).backward();
  opt.step();
}

// The small MLP most suites train (6 inputs, 4 classes) and its scenario.
inline std::shared_ptr<nn::Module> mlp(uint64_t seed) {
  Generator g(seed);
  return nn::make_mlp({6, 16, 12, 4}, &g);
}

inline Scenario mlp_scenario() {
  Scenario sc;
  sc.make_model = mlp;
  sc.make_batch = random_batches({6}, 4);
  return sc;
}

// BatchNorm2d over [N, C] rows (as [N, C, 1, 1]): running-statistics buffers in an MLP.
struct RowBatchNorm : nn::Module {
  std::shared_ptr<nn::BatchNorm2d> bn;
  explicit RowBatchNorm(int64_t c) : nn::Module("RowBatchNorm") {
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(c));
  }
  Tensor forward(const Tensor& x) override {
    return bn->forward(x.reshape({x.size(0), x.size(1), 1, 1})).reshape({x.size(0), x.size(1)});
  }
};

// 6 inputs -> Linear(8) -> BatchNorm -> ReLU -> Linear(4).
inline std::shared_ptr<nn::Module> mlp_with_batch_norm(uint64_t seed) {
  Generator g(seed);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(6, 8, true, &g));
  seq->push_back(std::make_shared<RowBatchNorm>(8));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::Linear>(8, 4, true, &g));
  return seq;
}

// A model with a branch used only on shards < use_branch_on, and one never used.
struct Branchy : nn::Module, ShardAware {
  std::shared_ptr<nn::Linear> trunk, branch, never, head;
  int use_branch_on = 0;
  explicit Branchy(uint64_t seed) : nn::Module("Branchy") {
    Generator g(seed);
    trunk = register_module("trunk", std::make_shared<nn::Linear>(6, 8, true, &g));
    branch = register_module("branch", std::make_shared<nn::Linear>(8, 8, true, &g));
    never = register_module("never", std::make_shared<nn::Linear>(8, 8, true, &g));
    head = register_module("head", std::make_shared<nn::Linear>(8, 4, true, &g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(trunk->forward(x));
    if (shard < use_branch_on) h = add(h, relu(branch->forward(h)));
    return head->forward(h);
  }
};

}  // namespace ember::distributed::testing
