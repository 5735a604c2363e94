// ZeRO stage 1 against DDP with the unsharded optimizer, under mpirun (bench/zero_bench.sh drives
// it and prints the tables of docs/zero.md):
//   mpirun -np 2 bazel-bin/bench/zero_bench --model=mlp --mode=zero_overlap --optimizer=adamw
// Every rank trains the same model (cross-entropy on a fixed synthetic batch that differs per
// rank) with DDP, and the optimizer is
//   ddp            the unsharded optimizer on every rank (the baseline)
//   zero           ZeroRedundancyOptimizer: each rank steps its shard, then broadcasts it
//   zero_overlap   the same, stepped bucket by bucket in DDP's comm hook (ZeroStepCommHook)
//   paired         all three in one run, as alternating blocks of --steps steps, --rounds times
//                  (run_paired), for ratios that a shared host's slow phases cannot tilt
// Models: resnet20 (nn::ResNet, 1x28x28, 0.27 M parameters) and mlp (--mlp_sizes, by default
// 1024,4096,4096,1024: 25.2 M parameters). Rank 0 prints one line:
//   RESULT model=... params=... mode=... optimizer=... world=... ms_per_step=... (slowest rank's median)
//          state_mb=... (the largest rank's optimizer state tensors) peak_rss_mb=... (largest rank)
//          state_mb_per_rank=a/b/c (every rank's)
// and, for --mode=paired, one PAIRED line per round and a RESULT line of the medians over rounds:
//   RESULT ... mode=paired ddp_ms=... zero_ms=... zero_overlap_ms=... zero_vs_ddp=... overlap_vs_ddp=...
//          overlap_vs_zero=...
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/distributed.h"
#include "distributed/optim/zero_redundancy_optimizer.h"
#include "distributed/optim/zero_step_hook.h"
#include "examples/common/flags.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/all.h"
#include "tensor/parallel.h"

using namespace ember;
using Clock = std::chrono::steady_clock;
namespace flags = ember::flags;

namespace {

struct Flags {
  std::string model = "mlp";
  std::string mode = "ddp";
  std::string optimizer = "adamw";
  std::string exchange = "broadcast";
  std::vector<int64_t> mlp_sizes{1024, 4096, 4096, 1024};
  int64_t steps = 10, warmup = 3, batch = 32, threads = 1, rounds = 5, bucket_bytes = 0;
};

const char* const kModes[] = {"ddp", "zero", "zero_overlap"};

void add_flags(flags::CommandLine& cli, Flags* f) {
  cli.add_option("--model", f->model, "resnet20 or mlp (--mlp_sizes)")->check(flags::one_of({"resnet20", "mlp"}));
  cli.add_option("--mode", f->mode, "ddp (unsharded optimizer), zero, zero_overlap, or paired (all three, alternating)")
      ->check(flags::one_of({"ddp", "zero", "zero_overlap", "paired"}));
  cli.add_option("--rounds", f->rounds, "paired: rounds of the three blocks")->check(flags::positive_integer());
  cli.add_option("--exchange", f->exchange, "zero modes: how the updated parameters travel, broadcast or allgather")
      ->check(flags::one_of({"broadcast", "allgather"}));
  cli.add_option("--bucket_bytes", f->bucket_bytes, "zero modes: broadcast_bucket_bytes (0: in place, or 25 MiB allgathers)")
      ->check(flags::non_negative_integer());
  cli.add_option("--optimizer", f->optimizer, "adamw or sgd (momentum 0.9)")->check(flags::one_of({"adamw", "sgd"}));
  cli.add_option("--mlp_sizes", f->mlp_sizes, "mlp: the layer widths")->delimiter(',')->check(flags::positive_integer());
  cli.add_option("--steps", f->steps, "timed steps")->check(flags::positive_integer());
  cli.add_option("--warmup", f->warmup, "untimed steps first")->check(flags::non_negative_integer());
  flags::add_batch(cli, &f->batch, "batch size per rank");
  flags::add_threads(cli, &f->threads);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Flags& f, const std::string& mode,
                                                 distributed::DistributedDataParallel& ddp,
                                                 const distributed::ProcessGroupPtr& pg) {
  const std::string name = f.optimizer;
  const distributed::OptimizerFactory factory =
      [name](std::vector<optim::OptimizerParamGroup> g) -> std::unique_ptr<optim::Optimizer> {
    if (name == "sgd") return std::make_unique<optim::SGD>(std::move(g), optim::SGDOptions(0.01).momentum(0.9));
    return std::make_unique<optim::AdamW>(std::move(g), optim::AdamWOptions(1e-4));
  };
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(ddp.parameters());
  if (mode == "ddp") return factory(std::move(groups));
  distributed::ZeroRedundancyOptimizerOptions o;
  o.overlap_with_ddp = mode == "zero_overlap";
  o.broadcast_bucket_bytes = f.bucket_bytes;
  o.parameter_exchange = f.exchange == "allgather" ? distributed::ParameterExchangeMode::kAllgather
                                                   : distributed::ParameterExchangeMode::kBroadcast;
  auto zero = std::make_unique<distributed::ZeroRedundancyOptimizer>(std::move(groups), factory, pg, o);
  if (o.overlap_with_ddp) ddp.register_comm_hook(std::make_unique<distributed::ZeroStepCommHook>(*zero));
  return zero;
}

// One mode's model, DDP wrapper and optimizer. Every setup starts from the same weights (seed 1).
struct Setup {
  std::shared_ptr<distributed::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> opt;
  int64_t params = 0;

  Setup(const Flags& f, const std::string& mode, const distributed::ProcessGroupPtr& pg) {
    Generator model_gen(1);
    std::shared_ptr<nn::Module> model;
    if (f.model == "resnet20") {
      model = std::make_shared<nn::ResNet>(nn::ResNetOptions{20, 16, 1, 10}, &model_gen);
    } else {
      model = nn::make_mlp(f.mlp_sizes, &model_gen);
    }
    for (const Tensor& p : model->parameters()) params += p.numel();
    ddp = std::make_shared<distributed::DistributedDataParallel>(model, distributed::DDPOptions{});
    opt = make_optimizer(f, mode, *ddp, pg);
  }
  ~Setup() { ddp.reset(); }  // the DDP and its hook first: the hook refers to the ZeRO optimizer
};

// Times `steps` training steps on this rank (forward, backward, step), each started by a barrier
// so the slowest rank's time is the step's.
std::vector<double> time_steps(distributed::ProcessGroup& pg, Setup& s, const Tensor& x, const Tensor& y,
                               int64_t steps) {
  nn::CrossEntropyLoss criterion;
  std::vector<double> ms;
  for (int64_t i = 0; i < steps; ++i) {
    pg.barrier()->wait();
    const auto t0 = Clock::now();
    s.opt->zero_grad();
    criterion(s.ddp->forward(x), y).backward();
    s.opt->step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

// This rank's optimizer state bytes (its shard's under ZeRO).
int64_t state_bytes(const optim::Optimizer& opt) {
  if (const auto* z = dynamic_cast<const distributed::ZeroRedundancyOptimizer*>(&opt)) return z->local_state_bytes();
  int64_t bytes = 0;
  for (const Tensor& p : opt.parameters()) {
    if (const optim::ParamState* st = opt.state(p)) {
      for (const auto& kv : *st) bytes += kv.second.nbytes();
    }
  }
  return bytes;
}

// Every rank's value, on every rank.
std::vector<double> gather(distributed::ProcessGroup& pg, double x) {
  std::vector<std::vector<Tensor>> out(1);
  for (int r = 0; r < pg.size(); ++r) out[0].push_back(empty({1}, kFloat64));
  std::vector<Tensor> in{from_vector<double>({x})};
  pg.allgather(out, in)->wait();
  std::vector<double> v;
  for (const Tensor& t : out[0]) v.push_back(t.item<double>());
  return v;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux: KiB
}

// --mode=paired: the three modes as blocks of --steps timed steps inside one mpirun, each on its
// own model (same initial weights) and DDP wrapper, repeated --rounds times in an order that
// reverses every round, so a slow phase of the host hits all three alike and each round gives its
// own ratios. A block's figure is the slowest rank's median step.
void run_paired(const Flags& f, const distributed::ProcessGroupPtr& pg, const Tensor& x, const Tensor& y) {
  constexpr int kCount = 3;
  std::vector<std::unique_ptr<Setup>> setups;
  for (const char* mode : kModes) setups.push_back(std::make_unique<Setup>(f, mode, pg));
  for (auto& s : setups) time_steps(*pg, *s, x, y, f.warmup);
  std::vector<double> ms[kCount], zero_vs_ddp, overlap_vs_ddp, overlap_vs_zero;
  for (int64_t round = 0; round < f.rounds; ++round) {
    double round_ms[kCount];
    for (int i = 0; i < kCount; ++i) {
      const int m = round % 2 == 0 ? i : kCount - 1 - i;
      const std::vector<double> slowest = gather(*pg, bench::median(time_steps(*pg, *setups[m], x, y, f.steps)));
      round_ms[m] = *std::max_element(slowest.begin(), slowest.end());
      ms[m].push_back(round_ms[m]);
    }
    zero_vs_ddp.push_back(round_ms[1] / round_ms[0]);
    overlap_vs_ddp.push_back(round_ms[2] / round_ms[0]);
    overlap_vs_zero.push_back(round_ms[2] / round_ms[1]);
    if (pg->rank() == 0) {
      std::printf("PAIRED round=%lld", static_cast<long long>(round + 1));
      for (int m = 0; m < kCount; ++m) std::printf(" %s_ms=%.2f", kModes[m], round_ms[m]);
      std::printf(" zero_vs_ddp=%.3f overlap_vs_ddp=%.3f overlap_vs_zero=%.3f\n", zero_vs_ddp.back(),
                  overlap_vs_ddp.back(), overlap_vs_zero.back());
      std::fflush(stdout);
    }
  }
  if (pg->rank() == 0) {
    std::printf("RESULT model=%s params=%lld mode=paired optimizer=%s exchange=%s world=%d steps=%lld rounds=%lld",
                f.model.c_str(), static_cast<long long>(setups[0]->params), f.optimizer.c_str(), f.exchange.c_str(),
                pg->size(),
                static_cast<long long>(f.steps), static_cast<long long>(f.rounds));
    for (int m = 0; m < kCount; ++m) std::printf(" %s_ms=%.2f", kModes[m], bench::median(ms[m]));
    std::printf(" zero_vs_ddp=%.3f overlap_vs_ddp=%.3f overlap_vs_zero=%.3f\n", bench::median(zero_vs_ddp),
                bench::median(overlap_vs_ddp), bench::median(overlap_vs_zero));
    std::fflush(stdout);
  }
}

// One mode: its median step, and the optimizer state and peak RSS of every rank.
void run_one(const Flags& f, const distributed::ProcessGroupPtr& pg, const Tensor& x, const Tensor& y) {
  Setup setup(f, f.mode, pg);
  time_steps(*pg, setup, x, y, f.warmup);
  const std::vector<double> step_ms = gather(*pg, bench::median(time_steps(*pg, setup, x, y, f.steps)));
  const std::vector<double> state_mb = gather(*pg, state_bytes(*setup.opt) / 1048576.0);
  const std::vector<double> rss_mb = gather(*pg, peak_rss_mb());
  if (pg->rank() == 0) {
    std::string per_rank;
    for (double m : state_mb) per_rank += (per_rank.empty() ? "" : "/") + std::to_string(m).substr(0, 6);
    std::printf("RESULT model=%s params=%lld mode=%s optimizer=%s exchange=%s world=%d ms_per_step=%.2f "
                "state_mb=%.2f peak_rss_mb=%.1f state_mb_per_rank=%s\n",
                f.model.c_str(), static_cast<long long>(setup.params), f.mode.c_str(), f.optimizer.c_str(),
                f.exchange.c_str(),
                pg->size(), *std::max_element(step_ms.begin(), step_ms.end()),
                *std::max_element(state_mb.begin(), state_mb.end()), *std::max_element(rss_mb.begin(), rss_mb.end()),
                per_rank.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto pg = distributed::init_process_group("mpi");
  const int rank = pg->rank();
  Flags f;
  flags::CommandLine cli("ZeRO stage 1 against DDP with the unsharded optimizer (bench/zero_bench.sh).", "zero_bench");
  add_flags(cli, &f);
  if (cli.parse(argc, argv, rank == 0) == flags::Parsed::kHelp) return 0;
  set_num_threads(static_cast<int>(f.threads));
  Generator data_gen(100 + rank);
  const int64_t classes = f.model == "resnet20" ? 10 : f.mlp_sizes.back();
  Tensor x = f.model == "resnet20" ? randn({f.batch, 1, 28, 28}, &data_gen) : randn({f.batch, f.mlp_sizes.front()}, &data_gen);
  Tensor y = randint(0, classes, {f.batch}, &data_gen);
  if (f.mode == "paired") {
    run_paired(f, pg, x, y);
  } else {
    run_one(f, pg, x, y);
  }
  distributed::destroy_process_group();
  return 0;
}
