// The DDP feature matrix: every combination of
//   static_graph x find_unused_parameters x gradient_as_bucket_view x no_sync accumulation
//   x comm hook {none, fp16, PowerSGD} x Join with uneven inputs x SyncBatchNorm
// = 2 x 2 x 2 x 2 x 3 x 2 x 2 = 192 combinations, all run (PyTorch accepts each of them), at 2 and 3
// ranks (28 of them under the sanitizers: kComboStride). None is left out as meaningless:
// static_graph with find_unused_parameters is one PyTorch documents ("it does not matter whether
// users set find_unused_parameters"), so it is run too.
//
// Model: Linear(6, 8) -> [BatchNorm, converted to SyncBatchNorm on a group of its own] -> ReLU ->
// Linear(8, 4), plus a Linear(8, 8) branch that no rank ever uses when find_unused_parameters or
// static_graph is on (without either, PyTorch refuses it: see below). Buckets of at most 200 bytes,
// so there are several, rebuilt after the first iterations. SGD (lr 0.1, momentum 0.9), k = 4
// steps of kPerRank = 4 rows per rank; with no_sync each step is 2 micro-batches, the first under
// no_sync; with Join rank r trains on k + r batches (DDP's Join and SyncBatchNormJoinable shadow
// the rest), gradients divided by the initial world size (PyTorch's default).
//
// Each combination must equal, on every rank, after training:
//   - no hook: one process training on the whole global batch (matrix_reference): in iteration t
//     the ranks with more than t batches train; the loss is the sum of their shards' mean
//     cross-entropies divided by the world size, BatchNorm statistics over all their rows (what
//     SyncBatchNorm computes; a joined rank contributes count 0). Parameters and buffers within
//     rtol 1e-5, atol 1e-6 (float32).
//   - fp16 or PowerSGD: one process running the same hook, a world-size-1 DDP over a group of this
//     rank alone with the same options, on the same rows (the hooks are linear in the ranks' sum:
//     PowerSGD's P = (sum M_r) Q and its residuals add up, a joined rank's zeros plus its residual
//     included). fp16: rtol and atol 5e-4 (each rank's share is rounded to half precision before
//     the sum, the single process rounds the sum once; the runs differ by up to 2e-4). PowerSGD
//     (rank 1, error feedback and warm start from start_powerSGD_iter = 2): rtol 1e-5, atol 1e-5
//     (the runs differ by ~1e-7, while either differs from the exact reference by 1e-2 to 2e-1).
//     The reference's no_sync runs the earlier micro-batches' forwards under no_sync and one
//     backward after the last, so DDP's no_sync backward path is not shared with the run under
//     test. The other options go through the same DDP code in both: the rows without a hook are
//     what prove them, the rows with one that the hooks compose with them.
// The unused branch must keep no gradient (PyTorch leaves a globally unused parameter's .grad
// untouched), and every rank must hold bit-identical parameters. The static_graph x no_sync rows
// start with a no_sync backward, PyTorch's regression pytorch/pytorch#143580 (fixed by #187732).
//
// Refused combinations (what PyTorch refuses, ember refuses with an ember::Error saying what to do):
//   - a branch unused on every rank with neither find_unused_parameters nor static_graph: the
//     second iteration throws "Expected to have finished reduction in the prior iteration ..." and
//     suggests find_unused_parameters=true (PyTorch reducer.cpp, ensure_prior_reduction_finished).
//   - PowerSGD with error feedback or warm start and start_powerSGD_iter <= 1: PowerSGDState
//     throws "expect start_powerSGD_iter > 1" (PyTorch powerSGD_hook.py, PowerSGDState.__init__:
//     the buckets are rebuilt after the first iteration, so memorised tensors would not fit).
//   - Join over a model whose SyncBatchNorm layers communicate over the Join's (DDP's) group, with
//     throw_on_early_termination off: DDP's join hook throws (PyTorch's DDP.join docstring: with
//     collectives such as SyncBatchNorm in forward, throw_on_early_termination must be enabled,
//     since Join does not know of them; PyTorch hangs where ember refuses). ember's extension,
//     SyncBatchNormJoinable over layers on their own group, is what the matrix's Join x
//     SyncBatchNorm rows use.
// PyTorch's SyncBatchNorm refuses CPU inputs; ember's runs on the CPU, so the matrix runs there.
#include <algorithm>
#include <numeric>

#include "distributed/hooks/default_hooks.h"
#include "distributed/hooks/powersgd_hook.h"
#include "distributed/sync_batch_norm.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 4;
constexpr int64_t kPerRank = 4;
constexpr double kBucketBytes = 200;

enum class Hook { kNone, kFp16, kPowerSGD };

struct Combo {
  bool static_graph = false;
  bool find_unused = false;
  bool bucket_view = false;
  bool no_sync = false;
  Hook hook = Hook::kNone;
  bool join = false;
  bool sync_bn = false;

  bool unused_branch() const { return static_graph || find_unused; }
  int micro_batches() const { return no_sync ? 2 : 1; }
  int batches_of(int rank) const { return join ? kSteps + rank : kSteps; }
  std::string name() const {
    const char* hooks[] = {"NoHook", "Fp16", "PowerSGD"};
    std::string n;
    n += static_graph ? "Static" : "Dynamic";
    n += find_unused ? "_FindUnused" : "";
    n += bucket_view ? "_BucketView" : "";
    n += no_sync ? "_NoSync" : "";
    n += std::string("_") + hooks[static_cast<int>(hook)];
    n += join ? "_Join" : "";
    n += sync_bn ? "_SyncBN" : "";
    return n;
  }
};

// Under ASan or TSan (CI's sanitizer tiers) every 7th combination runs: 28 of the 192, where each
// value of each axis and each pair of static_graph and no_sync still occurs (7 is prime to every
// axis's size). The whole matrix takes about 190 s under ASan; the plain tier runs all of it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kComboStride = 7;
#else
constexpr size_t kComboStride = 1;
#endif

std::vector<Combo> all_combos() {
  std::vector<Combo> out;
  for (bool s : {false, true})
    for (bool f : {false, true})
      for (bool v : {false, true})
        for (bool a : {false, true})
          for (Hook h : {Hook::kNone, Hook::kFp16, Hook::kPowerSGD})
            for (bool j : {false, true})
              for (bool b : {false, true}) out.push_back(Combo{s, f, v, a, h, j, b});
  std::vector<Combo> run;
  for (size_t i = 0; i < out.size(); i += kComboStride) run.push_back(out[i]);
  return run;
}

// fc1 -> [bn] -> relu -> fc2; `never` registered between them and never used.
struct MatrixNet : nn::Module {
  std::shared_ptr<nn::Linear> fc1, never, fc2;
  std::shared_ptr<RowBatchNorm> bn;
  MatrixNet(uint64_t seed, bool with_bn, bool with_never) : nn::Module("MatrixNet") {
    Generator g(seed);
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8, true, &g));
    if (with_bn) bn = register_module("bn", std::make_shared<RowBatchNorm>(8));
    if (with_never) never = register_module("never", std::make_shared<nn::Linear>(8, 8, true, &g));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 4, true, &g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = fc1->forward(x);
    if (bn) h = bn->forward(h);
    return fc2->forward(relu(h));
  }
};

// Rank r's rows of micro-batch `mb` of step `t`.
std::pair<Tensor, Tensor> shard(int t, int mb, int micro_batches, int rank, int world) {
  return rows(random_batches({6}, 4)(t * micro_batches + mb, world * kPerRank), rank * kPerRank, kPerRank);
}

DDPOptions ddp_options(const Combo& c, ProcessGroupPtr group) {
  DDPOptions o;
  o.process_group = std::move(group);
  o.static_graph = c.static_graph;
  o.find_unused_parameters = c.find_unused;
  o.gradient_as_bucket_view = c.bucket_view;
  o.bucket_cap_mb = kBucketBytes / (1024 * 1024);
  o.first_bucket_mb = kBucketBytes / (1024 * 1024);
  return o;
}

PowerSGDOptions powersgd_options() {
  return PowerSGDOptions().start_powerSGD_iter(2).min_compression_rate(1).use_error_feedback(true).warm_start(true);
}

void register_hook(DistributedDataParallel& ddp, Hook hook, ProcessGroupPtr group) {
  switch (hook) {
    case Hook::kNone: return;
    case Hook::kFp16: ddp.register_builtin_comm_hook(BuiltinCommHookType::kFp16Compress); return;
    case Hook::kPowerSGD:
      ddp.register_comm_hook<PowerSGDState>(std::make_shared<PowerSGDState>(group, powersgd_options()),
                                            powerSGD_hook, "powerSGD");
      return;
  }
}

struct Result {
  std::vector<Tensor> params, buffers;
};

// The single process of the header: plain BatchNorm on the rows of every rank still training. With
// a hook, wrapped in a world-size-1 DDP over `alone` running that hook.
Result matrix_reference(const Combo& c, int world, ProcessGroupPtr alone) {
  auto model = std::make_shared<MatrixNet>(1234, c.sync_bn, c.unused_branch());
  std::shared_ptr<DistributedDataParallel> ddp;
  if (c.hook != Hook::kNone) {
    ddp = std::make_shared<DistributedDataParallel>(model, ddp_options(c, alone));
    register_hook(*ddp, c.hook, alone);
  }
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  int steps = 0;
  for (int r = 0; r < world; ++r) steps = std::max(steps, c.batches_of(r));
  for (int t = 0; t < steps; ++t) {
    opt.zero_grad();
    Tensor step_loss;  // with a DDP: every micro-batch's loss, for one backward
    for (int mb = 0; mb < c.micro_batches(); ++mb) {
      std::vector<Tensor> xs, ys;
      for (int r = 0; r < world; ++r) {
        if (c.batches_of(r) <= t) continue;
        auto s = shard(t, mb, c.micro_batches(), r, world);
        xs.push_back(s.first);
        ys.push_back(s.second);
      }
      auto loss_of = [&](const Tensor& out) {
        Tensor loss;
        for (size_t i = 0; i < xs.size(); ++i) {
          Tensor l = div(nn::functional::cross_entropy(out.narrow(0, i * kPerRank, kPerRank), ys[i]),
                         static_cast<double>(world));
          loss = loss.defined() ? add(loss, l) : l;
        }
        return loss;
      };
      if (!ddp) {
        loss_of(model->forward(cat(xs))).backward();
        continue;
      }
      // The reference's no_sync: the forwards before the last run under no_sync (no DDP
      // bookkeeping), and one backward after the last covers them all. The hook sees the same
      // accumulated gradient, without going through DDP's no_sync backward path under test.
      Tensor loss;
      if (mb + 1 < c.micro_batches()) {
        auto guard = ddp->no_sync();
        loss = loss_of(ddp->forward(cat(xs)));
      } else {
        loss = loss_of(ddp->forward(cat(xs)));
      }
      step_loss = step_loss.defined() ? add(step_loss, loss) : loss;
    }
    if (step_loss.defined()) step_loss.backward();
    opt.step();
  }
  return {model->parameters(), model->buffers()};
}

class DdpFeatureMatrix : public MpiTest, public ::testing::WithParamInterface<Combo> {
 protected:
  void SetUp() override {
    MpiTest::SetUp();
    groups();  // every rank creates the groups in the same test
  }
  // A group of every rank for SyncBatchNorm (SyncBatchNormJoinable needs one other than the
  // Join's), and one of this rank alone for the world-size-1 reference.
  struct Groups {
    ProcessGroupPtr bn, alone;
  };
  const Groups& groups() {
    static Groups g = [this] {
      Groups made;
      std::vector<int> all(world_);
      std::iota(all.begin(), all.end(), 0);
      made.bn = new_group(all);
      for (int r = 0; r < world_; ++r) {
        if (ProcessGroupPtr one = new_group({r})) made.alone = one;
      }
      return made;
    }();
    return g;
  }

  // Trains this rank's batches with DDP under the combination.
  Result train(const Combo& c, std::shared_ptr<MatrixNet>* net_out = nullptr) {
    auto net = std::make_shared<MatrixNet>(rank_ == 0 ? 1234 : 1234 + 17 * rank_, c.sync_bn, c.unused_branch());
    std::shared_ptr<nn::Module> model = net;
    if (c.sync_bn) model = nn::convert_sync_batchnorm(model, groups().bn);
    auto ddp = std::make_shared<DistributedDataParallel>(model, ddp_options(c, pg_));
    register_hook(*ddp, c.hook, pg_);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    auto body = [&] {
      for (int t = 0; t < c.batches_of(rank_); ++t) {
        opt.zero_grad();
        for (int mb = 0; mb < c.micro_batches(); ++mb) {
          auto s = shard(t, mb, c.micro_batches(), rank_, world_);
          if (mb + 1 < c.micro_batches()) {
            auto guard = ddp->no_sync();
            nn::functional::cross_entropy(ddp->forward(s.first), s.second).backward();
          } else {
            nn::functional::cross_entropy(ddp->forward(s.first), s.second).backward();
          }
        }
        opt.step();
      }
    };
    if (c.join) {
      std::unique_ptr<SyncBatchNormJoinable> bn_joinable;
      std::vector<Joinable*> joinables{ddp.get()};
      if (c.sync_bn) {
        bn_joinable = std::make_unique<SyncBatchNormJoinable>(model, ddp->join_process_group());
        joinables.push_back(bn_joinable.get());
      }
      Join::run(joinables, JoinOptions{}, body);
    } else {
      body();
    }
    if (net_out) *net_out = net;
    return {model->parameters(), model->buffers()};
  }

  ::testing::AssertionResult ranks_agree(const std::vector<Tensor>& params) { return testing::ranks_agree(*pg_, params); }
};

TEST_P(DdpFeatureMatrix, EqualsOneProcess) {
  const Combo c = GetParam();
  // The header's tolerances: |got - want| <= atol + rtol * |want| per element.
  const double rtol = c.hook == Hook::kFp16 ? 5e-4 : 1e-5;
  const double atol = c.hook == Hook::kFp16 ? 5e-4 : c.hook == Hook::kPowerSGD ? 1e-5 : 1e-6;
  const Result want = matrix_reference(c, world_, groups().alone);
  std::shared_ptr<MatrixNet> net;
  const Result got = train(c, &net);
  EXPECT_TRUE(parameters_match(got.params, want.params, rtol, atol)) << "parameters";
  EXPECT_TRUE(parameters_match(got.buffers, want.buffers, rtol, atol)) << "buffers";
  EXPECT_TRUE(ranks_agree(got.params));
  if (net->never) {
    EXPECT_FALSE(net->never->weight().grad().defined()) << "the branch no rank uses got a gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, DdpFeatureMatrix, ::testing::ValuesIn(all_combos()),
                         [](const ::testing::TestParamInfo<Combo>& info) { return info.param.name(); });

// ---- refused combinations -------------------------------------------------------------------

class DdpFeatureMatrixRefused : public MpiTest {};

// PyTorch's reducer.cpp (ensure_prior_reduction_finished): a parameter that got no gradient
// without find_unused_parameters or static_graph fails the next iteration, naming the fix.
TEST_F(DdpFeatureMatrixRefused, UnusedBranchWithoutFindUnusedParameters) {
  for (Hook hook : {Hook::kNone, Hook::kFp16, Hook::kPowerSGD}) {
    auto ddp = std::make_shared<DistributedDataParallel>(std::make_shared<MatrixNet>(1, false, true),
                                                         ddp_options(Combo{}, pg_));
    register_hook(*ddp, hook, pg_);
    auto s = shard(0, 0, 1, rank_, world_);
    nn::functional::cross_entropy(ddp->forward(s.first), s.second).backward();
    const std::string msg = error_of([&] { (void)ddp->forward(s.first); });
    EXPECT_THAT(msg, HasSubstr("Expected to have finished reduction in the prior iteration"));
    EXPECT_THAT(msg, HasSubstr("find_unused_parameters=true"));
    EXPECT_THAT(msg, HasSubstr("never.weight"));
  }
}

// PyTorch's PowerSGDState.__init__: error feedback or warm start needs start_powerSGD_iter > 1.
TEST_F(DdpFeatureMatrixRefused, PowerSGDMemoryBeforeTheBucketRebuild) {
  for (bool feedback : {true, false}) {
    const std::string msg = error_of([&] {
      PowerSGDState state(pg_, PowerSGDOptions().start_powerSGD_iter(1).use_error_feedback(feedback).warm_start(!feedback));
    });
    EXPECT_THAT(msg, HasSubstr("expect start_powerSGD_iter > 1 if use_error_feedback or warm_start"));
  }
}

// PyTorch's DDP.join docstring: collectives in forward such as SyncBatchNorm's need
// throw_on_early_termination (Join cannot shadow them; PyTorch hangs). ember refuses layers on the
// Join's group; those on a group of their own are shadowed by SyncBatchNormJoinable.
TEST_F(DdpFeatureMatrixRefused, JoinWithSyncBatchNormOnTheJoinsGroup) {
  auto model = nn::convert_sync_batchnorm(std::make_shared<MatrixNet>(1, true, false), pg_);
  auto ddp = std::make_shared<DistributedDataParallel>(model, ddp_options(Combo{}, pg_));
  const std::string msg = error_of([&] { Join join({ddp.get()}); });
  EXPECT_THAT(msg, HasSubstr("SyncBatchNorm layer 'bn.bn'"));
  EXPECT_THAT(msg, HasSubstr("throw_on_early_termination"));
  EXPECT_THAT(msg, HasSubstr("SyncBatchNormJoinable"));
  // With throw_on_early_termination every rank throws once one runs out of data: accepted.
  JoinOptions throwing;
  throwing.throw_on_early_termination = true;
  EXPECT_NO_THROW({ Join join({ddp.get()}, throwing); });
}

}  // namespace
}  // namespace ember::distributed::testing
