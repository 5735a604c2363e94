// DDP training-step benchmark, one run per invocation under mpirun (bench/ddp_bench.sh drives it):
//   mpirun -np 2 bazel-bin/bench/ddp_bench --model=resnet20 --mode=ddp --bucket_cap_mb=25 --steps=30
// Every rank trains the same model (SGD momentum 0.9, cross-entropy, per-rank batch 64, a fixed
// synthetic batch that differs per rank) and times whole steps (forward, zero_grad, backward with
// DDP's overlapped allreduces, optimizer step). Modes:
//   ddp     DistributedDataParallel, gradients synchronised every step (the real thing)
//   nosync  the same DDP wrapper, every step inside no_sync(): no gradient communication
//   single  the bare model, no DDP: each rank an independent single-process run (launch it with
//           -np 1 for "one process alone", -np 2 for "two independent processes side by side")
//   paired  all of the above as alternating blocks in one run, --rounds times (see run_paired)
// Models: resnet20 (nn::ResNet, 1x28x28 input) and mlp (--mlp_layers Linear layers of
// --mlp_width x --mlp_width with ReLU: many small parameters, for the bucket-size experiment; or
// --mlp_sizes=784,4096,4096,10: the layer widths, e.g. the wide MLP of the comm-hook benchmark).
// --comm_hook=NAME (with --powersgd_rank and --powersgd_start_iter) registers a communication hook
// on the DDP model; --help lists the names and every flag (examples/common/comm_hook_by_name.h).
// --device=cuda trains on the GPU of each rank's local rank, over --backend=nccl (the default there)
// or --backend=mpi (staging through host memory); steps are timed to a device synchronisation.
// Rank 0 prints one line (the step time is the slowest rank's median):
//   RESULT impl=ember model=... mode=... world=2 bucket_cap_mb=... first_bucket_mb=... buckets=...
//          ms_per_step=... mean_ms_per_step=... img_per_s=... comm_wall_ms=... exposed_comm_ms=... overlap=... peak_rss_mb=...
//          comm_hook=... bytes_per_step=...   (payload this rank handed to collectives per timed step)
//          device=... backend=... peak_device_mb=...   (peak allocated on the GPU; 0 on the CPU)
//          other_threads_cpu_ms=...   (CPU time per timed step of every thread but the training one:
//          the comm thread and MPI's, plus intra-op workers with --threads > 1; slowest rank)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/distributed.h"
#include "examples/common/comm_hook_by_name.h"
#include "examples/common/flags.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/all.h"
#include "tensor/cpu/capability.h"
#include "tensor/cuda_stream.h"
#include "tensor/device_backend.h"
#include "tensor/parallel.h"

using namespace ember;
using Clock = std::chrono::steady_clock;
namespace flags = ember::flags;

namespace {

double cpu_ms(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct Flags {
  std::string model = "resnet20";
  std::string mode = "ddp";
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1.0;  // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES
  int64_t steps = 30, warmup = 5, batch = 64, mlp_layers = 200, mlp_width = 64, threads = 1, rounds = 5;
  uint64_t seed = 0;
  std::vector<int64_t> mlp_sizes;  // overrides mlp_layers / mlp_width when given
  examples::CommHookSpec hook{"none", 1, 2};
  std::string device = "cpu";  // or cuda
  std::string backend;         // default: nccl on cuda, mpi on the CPU
};

// The command line (examples/common/flags.h: the names and checks the trainers share).
void add_flags(flags::CommandLine& cli, Flags* f) {
  const double kMax = std::numeric_limits<double>::max();
  cli.add_option("--model", f->model, "resnet20 (nn::ResNet, 1x28x28) or mlp (--mlp_*)")
      ->check(flags::one_of({"resnet20", "mlp"}));
  cli.add_option("--mode", f->mode,
                 "ddp (gradients synchronised every step), nosync (inside no_sync()), single (no DDP) or "
                 "paired (all of them in alternating blocks, --rounds times)")
      ->check(flags::one_of({"ddp", "nosync", "single", "paired"}));
  cli.add_option("--rounds", f->rounds, "paired: rounds of the four blocks")->check(flags::positive_integer());
  cli.add_option("--bucket_cap_mb", f->bucket_cap_mb, "DDP bucket cap in MiB")
      ->check(flags::number_in(std::numeric_limits<double>::min(), kMax, "positive"));
  cli.add_option("--first_bucket_mb", f->first_bucket_mb, "cap of DDP's first bucket in MiB")
      ->check(flags::number_in(std::numeric_limits<double>::min(), kMax, "positive"));
  cli.add_option("--steps", f->steps, "timed steps")->check(flags::positive_integer());
  cli.add_option("--warmup", f->warmup, "untimed steps first")->check(flags::non_negative_integer());
  flags::add_batch(cli, &f->batch, "batch size per rank");
  cli.add_option("--mlp_layers", f->mlp_layers, "mlp: Linear layers of --mlp_width x --mlp_width")
      ->check(flags::positive_integer());
  cli.add_option("--mlp_width", f->mlp_width, "mlp: layer width")->check(flags::positive_integer());
  cli.add_option("--mlp_sizes", f->mlp_sizes, "mlp: the layer widths, e.g. 784,4096,4096,10 (overrides the above)")
      ->delimiter(',')
      ->check(flags::positive_integer());
  flags::add_seed(cli, &f->seed);
  flags::add_threads(cli, &f->threads);
  examples::add_comm_hook_flags(cli, &f->hook, flags::integer_in(2, flags::kNoLimit, "at least 2"),
                                "PowerSGD start_powerSGD_iter");
  flags::add_device(cli, &f->device);
  flags::add_backend(cli, &f->backend);
}

using ember::bench::median;

double max_over_ranks(distributed::ProcessGroup& pg, double x) {
  std::vector<Tensor> t{from_vector<double>({x}).to(pg.collective_device())};
  distributed::AllreduceOptions o;
  o.reduce_op = distributed::ReduceOp::kMax;
  pg.allreduce(t, o)->wait();
  return t[0].item<double>();
}

// One training step: forward, zero_grad, backward (inside no_sync() of `no_sync_of` when given),
// the optimizer's step.
void train_step(nn::Module& net, optim::SGD& opt, nn::CrossEntropyLoss& criterion, const Tensor& x,
                const Tensor& y, distributed::DistributedDataParallel* no_sync_of) {
  {
    std::unique_ptr<distributed::DistributedDataParallel::NoSyncGuard> guard;
    if (no_sync_of) guard = std::make_unique<distributed::DistributedDataParallel::NoSyncGuard>(*no_sync_of);
    Tensor loss = criterion(net.forward(x), y);
    opt.zero_grad();
    loss.backward();
  }
  opt.step();
}

using ModelFactory = std::function<std::shared_ptr<nn::Module>()>;

// --mode=paired: the scaling table's four runs as blocks of --steps timed steps inside one mpirun,
// repeated --rounds times in an order that reverses every round, so a slow phase of a shared host
// (minutes long on this project's VMs) hits all four alike and each round gives its own ratios:
//   single_x1  rank 0 alone trains a bare copy of the model; the other ranks wait in a collective
//   single_x2  every rank trains its bare copy
//   nosync     the DDP-wrapped model, every step inside no_sync()
//   ddp        the DDP-wrapped model, gradients synchronised
// Prints one PAIRED line per round and a RESULT line of the medians over rounds (rank 0).
void run_paired(const Flags& f, distributed::ProcessGroup& pg, const ModelFactory& make_model, const Tensor& x,
                const Tensor& y) {
  enum Block { kSingleX1, kSingleX2, kNoSync, kDDP, kBlocks };
  const char* kNames[kBlocks] = {"single_x1", "single_x2", "nosync", "ddp"};
  std::shared_ptr<nn::Module> bare = make_model();
  std::shared_ptr<nn::Module> wrapped = make_model();
  bare->train();
  wrapped->train();
  distributed::DDPOptions o;
  o.bucket_cap_mb = f.bucket_cap_mb;
  o.first_bucket_mb = f.first_bucket_mb;
  distributed::DistributedDataParallel ddp(wrapped, o);
  optim::SGD bare_opt(bare->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  optim::SGD ddp_opt(ddp.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  nn::CrossEntropyLoss criterion;
  // The median step of `steps` steps of `block` on this rank (0 where the rank sits it out).
  auto run_block = [&](Block block, int64_t steps) {
    if (block == kSingleX1 && pg.rank() != 0) return 0.0;
    const bool bare_model = block == kSingleX1 || block == kSingleX2;
    nn::Module& net = bare_model ? static_cast<nn::Module&>(*bare) : ddp;
    optim::SGD& opt = bare_model ? bare_opt : ddp_opt;
    std::vector<double> times;
    for (int64_t s = 0; s < steps; ++s) {
      const auto t0 = Clock::now();
      train_step(net, opt, criterion, x, y, block == kNoSync ? &ddp : nullptr);
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return median(times);
  };
  for (Block b : {kSingleX2, kDDP}) run_block(b, f.warmup);
  std::vector<double> ms[kBlocks], efficiency, eff_vs_x2, overhead, sharing;
  for (int64_t round = 0; round < f.rounds; ++round) {
    double round_ms[kBlocks];
    for (int i = 0; i < kBlocks; ++i) {
      const Block b = static_cast<Block>(round % 2 == 0 ? i : kBlocks - 1 - i);
      pg.barrier()->wait();
      round_ms[b] = max_over_ranks(pg, run_block(b, f.steps));
      ms[b].push_back(round_ms[b]);
    }
    // ddp img/s over (world x one process alone's img/s); over two side by side; ddp step over
    // nosync's; and what the machine loses running world processes instead of one (no DDP at all):
    // efficiency = sharing x (single_x2 / nosync) / overhead.
    efficiency.push_back(round_ms[kSingleX1] / round_ms[kDDP]);
    eff_vs_x2.push_back(round_ms[kSingleX2] / round_ms[kDDP]);
    overhead.push_back(round_ms[kDDP] / round_ms[kNoSync]);
    sharing.push_back(round_ms[kSingleX1] / round_ms[kSingleX2]);
    if (pg.rank() == 0) {
      std::printf("PAIRED round=%lld", static_cast<long long>(round + 1));
      for (int b = 0; b < kBlocks; ++b) std::printf(" %s_ms=%.2f", kNames[b], round_ms[b]);
      std::printf(" efficiency=%.3f eff_vs_x2=%.3f overhead=%.3f sharing=%.3f\n", efficiency.back(),
                  eff_vs_x2.back(), overhead.back(), sharing.back());
    }
  }
  if (pg.rank() == 0) {
    std::printf("RESULT impl=ember model=%s mode=paired world=%d batch=%lld steps=%lld rounds=%lld",
                f.model.c_str(), pg.size(), static_cast<long long>(f.batch), static_cast<long long>(f.steps),
                static_cast<long long>(f.rounds));
    for (int b = 0; b < kBlocks; ++b) std::printf(" %s_ms=%.2f", kNames[b], median(ms[b]));
    std::printf(" efficiency=%.3f eff_vs_x2=%.3f overhead=%.3f sharing=%.3f threads=%d capability=%s\n",
                median(efficiency), median(eff_vs_x2), median(overhead), median(sharing), get_num_threads(),
                cpu_capability());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Until the process group exists, the launcher says which rank this is.
  int rank = flags::launcher_rank();
  Flags f;
  try {
    flags::CommandLine cli("DDP training-step benchmark, one run per invocation under mpirun (bench/ddp_bench.sh).", "ddp_bench");
    add_flags(cli, &f);
    if (cli.parse(argc, argv, rank == 0) == flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    // Every rank parses the same command line: rank 0 reports it.
    if (rank == 0) flags::report_rank_error(rank, "ddp_bench", e.what());
    return 2;
  }
  try {
    EMBER_CHECK(f.hook.name == "none" || f.mode == "ddp", "--comm_hook needs --mode=ddp");
    f.backend = flags::default_backend(f.backend, f.device);
    EMBER_CHECK(f.backend == "mpi" || (f.backend == "nccl" && f.device == "cuda"),
                "--backend=", f.backend, " with --device=", f.device, " (nccl needs cuda)");
    EMBER_CHECK(f.device == "cpu" || cuda_device_count() > 0, "--device=cuda but no CUDA device (",
                has_device_backend(DeviceType::kCUDA) ? "none visible" : "build with --config=cuda", ")");
    const Device device = f.device == "cpu" ? kCPU : cuda_device_of_local_rank(distributed::local_rank());
    set_num_threads(static_cast<int>(f.threads));
    auto pg = distributed::init_process_group(f.backend);
    rank = pg->rank();
    const int world = pg->size();
    std::vector<int64_t> sizes = f.mlp_sizes;
    if (f.model == "mlp") {
      if (sizes.empty()) {
        sizes.assign(f.mlp_layers, f.mlp_width);
        sizes.push_back(10);
      }
      EMBER_CHECK(sizes.size() >= 2 && sizes.back() == 10, "--mlp_sizes needs >= 2 widths ending in 10");
    }
    // Every call builds the same initial weights.
    const ModelFactory make_model = [&]() -> std::shared_ptr<nn::Module> {
      Generator model_gen(static_cast<uint64_t>(f.seed));
      if (f.model == "resnet20") return std::make_shared<nn::ResNet>(nn::ResNetOptions{20, 16, 1, 10}, &model_gen);
      return nn::make_mlp(sizes, &model_gen);
    };
    Generator data_gen(static_cast<uint64_t>(f.seed) + 1000 + rank);
    Tensor x = f.model == "resnet20" ? randn({f.batch, 1, 28, 28}, &data_gen) : randn({f.batch, sizes.front()}, &data_gen);
    Tensor y = randint(0, 10, {f.batch}, &data_gen);
    if (f.mode == "paired") {
      EMBER_CHECK(f.device == "cpu" && f.hook.name == "none", "--mode=paired: the CPU and no comm hook only");
      run_paired(f, *pg, make_model, x, y);
      distributed::destroy_process_group();
      return 0;
    }
    std::shared_ptr<nn::Module> model = make_model();
    model->to(device);
    x = x.to(device);
    y = y.to(device);
    // A step ends when the device has finished it (on the CPU, when the calls return).
    auto sync = [&] {
      if (device.is_cuda()) cuda_synchronize(device.index);
    };
    model->train();
    std::shared_ptr<distributed::DistributedDataParallel> ddp;
    nn::Module* net = model.get();
    if (f.mode != "single") {
      distributed::DDPOptions o;
      o.bucket_cap_mb = f.bucket_cap_mb;
      o.first_bucket_mb = f.first_bucket_mb;
      ddp = std::make_shared<distributed::DistributedDataParallel>(model, o);
      examples::register_comm_hook_by_name(*ddp, pg, f.hook);
      net = ddp.get();
    }
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    nn::CrossEntropyLoss criterion;
    const bool nosync = f.mode == "nosync";
    std::vector<double> times, comm_wall, exposed, overlap;
    pg->barrier()->wait();
    Clock::time_point timed_start;
    uint64_t timed_bytes = 0;
    double process_cpu_start = 0, main_cpu_start = 0;
    for (int64_t s = 0; s < f.warmup + f.steps; ++s) {
      if (s == f.warmup) {
        sync();
        if (device.is_cuda()) cuda_reset_peak_memory_stats(device.index);
        timed_start = Clock::now();
        timed_bytes = pg->payload_bytes();
        process_cpu_start = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
        main_cpu_start = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
      }
      const auto t0 = Clock::now();
      train_step(*net, opt, criterion, x, y, nosync ? ddp.get() : nullptr);
      sync();
      const auto t1 = Clock::now();
      if (s >= f.warmup) {
        times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (ddp && !nosync) {
          const auto d = ddp->get_ddp_logging_data();
          comm_wall.push_back(d.last.comm_wall_ms);
          exposed.push_back(d.last.exposed_comm_ms);
          overlap.push_back(d.last.overlap);
        }
      }
    }
    const double bytes_per_step = f.steps > 0 ? static_cast<double>(pg->payload_bytes() - timed_bytes) / f.steps : 0;
    const double mean_ms =
        f.steps > 0 ? std::chrono::duration<double, std::milli>(Clock::now() - timed_start).count() / f.steps : 0;
    const double other_cpu_ms = std::max(0.0, ((cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start) -
                                               (cpu_ms(CLOCK_THREAD_CPUTIME_ID) - main_cpu_start)) /
                                                  static_cast<double>(f.steps));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double step_ms = max_over_ranks(*pg, median(times));
    const double mean_step_ms = max_over_ranks(*pg, mean_ms);
    const double comm_wall_ms = max_over_ranks(*pg, median(comm_wall));
    const double exposed_ms = max_over_ranks(*pg, median(exposed));
    const double rss_mb = max_over_ranks(*pg, ru.ru_maxrss / 1024.0);
    const double other_threads_cpu_ms = max_over_ranks(*pg, other_cpu_ms);
    const double peak_device_mb = max_over_ranks(
        *pg, device.is_cuda() ? cuda_memory_stats(device.index).peak_allocated_bytes / 1048576.0 : 0.0);
    int64_t buckets = 0;
    if (ddp) buckets = ddp->get_ddp_logging_data().num_buckets;
    if (rank == 0) {
      std::printf(
          "RESULT impl=ember model=%s mode=%s world=%d batch=%lld steps=%lld bucket_cap_mb=%g first_bucket_mb=%g "
          "buckets=%lld params=%zu ms_per_step=%.2f mean_ms_per_step=%.2f img_per_s=%.1f comm_wall_ms=%.2f "
          "exposed_comm_ms=%.2f overlap=%.2f peak_rss_mb=%.1f comm_hook=%s bytes_per_step=%.0f threads=%d capability=%s device=%s "
          "backend=%s peak_device_mb=%.1f other_threads_cpu_ms=%.2f\n",
          f.model.c_str(), f.mode.c_str(), world, (long long)f.batch, (long long)f.steps, f.bucket_cap_mb, f.first_bucket_mb,
          (long long)buckets, model->parameters().size(), step_ms, mean_step_ms,
          step_ms > 0 ? 1000.0 * world * f.batch / step_ms : 0.0, comm_wall_ms, exposed_ms, median(overlap), rss_mb,
          f.hook.name.c_str(), bytes_per_step, get_num_threads(), cpu_capability(), f.device.c_str(),
          f.backend.c_str(), peak_device_mb, other_threads_cpu_ms);
      std::fflush(stdout);
    }
    ddp.reset();
    distributed::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    flags::report_rank_error(rank, "ddp_bench", e.what());
    return 1;
  }
}
