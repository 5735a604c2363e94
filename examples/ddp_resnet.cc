// Trains ResNet-20 on Fashion-MNIST with DistributedDataParallel under mpirun (the main job):
//   mpirun -np 2 bazel-bin/examples/ddp_resnet --epochs=5 [--comm_hook=powersgd --powersgd_rank=4]
//   mpirun -np 2 bazel-bin/examples/ddp_resnet --device=cuda   (--config=cuda: NCCL, one GPU per rank)
//   mpirun -np 2 bazel-bin/examples/ddp_resnet --zero=1 [--zero_overlap=1] [--optimizer=adamw]
// --zero=1: ZeroRedundancyOptimizer (ZeRO stage 1, docs/zero.md): each rank keeps the optimizer
// state of its shard of the parameters only; --zero_overlap=1 steps each bucket's shard in DDP's
// comm hook as its allreduce completes. Checkpoints hold the consolidated (unsharded) optimizer
// state, so a run saved at one world size resumes at another.
// Every rank reads its DistributedSampler shard with a per-rank batch; DDP averages gradients
// with bucketed allreduces overlapped with backward (through a comm hook when one is chosen).
// Rank 0 shows progress, evaluation is split across ranks, checkpoints resume exactly
// (examples/common/train_checkpoint.h: every rank adds its own PowerSGD state) and the final line
//   RESULT test_acc=... img_per_s=... ms_per_step=... comm_hook=... bytes_per_step=... compression=...
// (img/s counts all ranks; bytes_per_step: payload this rank handed to collectives per step in the
// last epoch; compression: the model's fp32 gradient bytes / bytes_per_step).
// --metrics=FILE.csv|FILE.jsonl: rank 0 writes a row per step (examples/common/metrics_writer.h).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <ember/distributed.h>

#include "examples/common/comm_hook_by_name.h"
#include "examples/common/flags.h"
#include "examples/common/training.h"

namespace ember::examples {
namespace flags = ember::flags;

namespace {

// DDP's rebuilt bucket layout for the checkpoint: [bucket count, sizes..., parameter indices...]
// (empty before the rebuild, when the next run rebuilds by itself).
nn::StateDict bucket_layout_state(const distributed::DistributedDataParallel& ddp) {
  const auto layout = ddp.rebuilt_bucket_layout();
  if (layout.empty()) return {};
  std::vector<int64_t> flat{static_cast<int64_t>(layout.size())};
  for (const auto& b : layout) flat.push_back(static_cast<int64_t>(b.size()));
  for (const auto& b : layout) flat.insert(flat.end(), b.begin(), b.end());
  return {{"bucket_layout", from_vector<int64_t>(flat)}};
}

void load_bucket_layout_state(distributed::DistributedDataParallel& ddp, const nn::StateDict& sd) {
  EMBER_CHECK(sd.size() == 1 && sd[0].first == "bucket_layout" && sd[0].second.dtype() == kInt64 &&
                  sd[0].second.dim() == 1 && sd[0].second.numel() >= 1,
              "resume: the checkpoint's ddp.* state is not a bucket layout");
  const Tensor& t = sd[0].second;
  const int64_t* p = t.data_ptr<int64_t>();
  const int64_t n = t.numel(), buckets = p[0];
  EMBER_CHECK(buckets >= 1 && 1 + buckets <= n, "resume: corrupt ddp.bucket_layout");
  std::vector<std::vector<size_t>> layout(static_cast<size_t>(buckets));
  int64_t at = 1 + buckets;
  for (int64_t b = 0; b < buckets; ++b) {
    EMBER_CHECK(p[1 + b] >= 0 && at + p[1 + b] <= n, "resume: corrupt ddp.bucket_layout");
    for (int64_t k = 0; k < p[1 + b]; ++k) layout[b].push_back(static_cast<size_t>(p[at++]));
  }
  EMBER_CHECK(at == n, "resume: corrupt ddp.bucket_layout");
  ddp.load_bucket_layout(std::move(layout));
}

// SGD (the trainers' usual) or AdamW, sharded across the ranks with --zero=1.
std::unique_ptr<optim::Optimizer> make_optimizer(const examples::TrainConfig& cfg, const std::string& name, bool zero,
                                                 bool overlap, distributed::DistributedDataParallel& ddp,
                                                 const distributed::ProcessGroupPtr& pg) {
  const distributed::OptimizerFactory factory =
      [cfg, name](std::vector<optim::OptimizerParamGroup> groups) -> std::unique_ptr<optim::Optimizer> {
    if (name == "adamw") {
      return std::make_unique<optim::AdamW>(std::move(groups),
                                            optim::AdamWOptions(cfg.lr).weight_decay(cfg.weight_decay));
    }
    return std::make_unique<optim::SGD>(
        std::move(groups), optim::SGDOptions(cfg.lr).momentum(cfg.momentum).weight_decay(cfg.weight_decay));
  };
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(ddp.parameters());
  if (!zero) return factory(std::move(groups));
  distributed::ZeroRedundancyOptimizerOptions options;
  options.overlap_with_ddp = overlap;
  return std::make_unique<distributed::ZeroRedundancyOptimizer>(std::move(groups), factory, pg, options);
}

}  // namespace

int example_main(int argc, char** argv) {
  // Until the process group exists, the launcher says which rank this is.
  int rank = flags::launcher_rank();
  bool flags_parsed = false;
  try {
    bool help = false;
    examples::CommHookSpec hook;
    hook.powersgd_start_iter = -1;
    int64_t timeout_s = 60;
    int64_t straggler_check_every = 0;
    double bucket_cap_mb = 0, first_bucket_mb = 0;  // 0: PyTorch's caps (DDPOptions)
    std::string backend;  // default: nccl for --device=cuda, mpi for the CPU
    bool zero = false, zero_overlap = false;
    std::string optimizer = "sgd";
    const auto ddp_flags = [&](flags::CommandLine& cli) {
      examples::add_comm_hook_flags(
          cli, &hook, flags::integer_where([](int64_t i) { return i == -1 || i >= 2; }, "-1 or at least 2"),
          "PowerSGD start_powerSGD_iter (-1: 10% of the training steps, at least 2)");
      flags::add_backend(cli, &backend);
      cli.add_option("--timeout", timeout_s, "seconds a collective may wait for a peer before the job fails, naming it")
          ->check(flags::positive_integer());
      cli.add_option("--straggler_check_every", straggler_check_every,
                     "every N steps, probe the ranks' links and compare their compute times; rank 0 names a slow "
                     "host or rank when the verdict changes (0 = off)")
          ->check(flags::non_negative_integer());
      cli.add_option("--bucket_cap_mb", bucket_cap_mb, "DDP's bucket cap in MiB (0: PyTorch's default, 25)")
          ->check(flags::number_in(0, 1e6, "a size in MiB"));
      cli.add_option("--first_bucket_mb", first_bucket_mb,
                     "the first bucket's cap in MiB (0: as PyTorch, 1 with the default bucket cap, else that cap)")
          ->check(flags::number_in(0, 1e6, "a size in MiB"));
      cli.add_option("--zero", zero, "ZeRO stage 1: shard the optimizer state across the ranks, 0 or 1")
          ->check(flags::zero_or_one());
      cli.add_option("--zero_overlap", zero_overlap,
                     "with --zero=1: step each bucket's shard in DDP's comm hook, overlapped with backward, 0 or 1")
          ->check(flags::zero_or_one());
      cli.add_option("--optimizer", optimizer, "sgd (momentum, --weight_decay) or adamw (--weight_decay)")
          ->check(flags::one_of({"sgd", "adamw"}));
    };
    // Linear scaling: the global batch grows with the world size, so does the default peak lr.
    examples::TrainConfig cfg = examples::parse_flags(argc, argv, "ddp_resnet", &help, ddp_flags, rank == 0);
    if (help) return 0;
    flags_parsed = true;
    EMBER_CHECK(!zero_overlap || zero, "--zero_overlap=1 needs --zero=1");
    EMBER_CHECK(!zero_overlap || hook.name == "none" || hook.name.empty(),
                "--zero_overlap=1 is a comm hook of its own: drop --comm_hook=", hook.name);
    // A stalled or dead peer ends the job within --timeout, not after PyTorch's library default.
    distributed::ProcessGroup::Options pg_options;
    pg_options.timeout = std::chrono::seconds(timeout_s);
    backend = flags::default_backend(backend, cfg.device);
    EMBER_CHECK(backend != "nccl" || cfg.device == "cuda",
                "--backend=nccl communicates GPU tensors: add --device=cuda (or use --backend=mpi)");
    // Processes on this host: Open MPI says; otherwise assume the whole job is here.
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    // Checked before the group exists: NCCL needs a GPU, and this names the flag that asked for one.
    const Device device = examples::training_device(cfg, distributed::local_rank());
    // Opened before the group exists: a bad path ends the job at once (the launcher stops the other
    // ranks), not with rank 0 gone while the others wait in a collective.
    std::unique_ptr<examples::MetricsWriter> metrics;
    if (rank == 0 && !cfg.metrics.empty()) {
      metrics = std::make_unique<examples::MetricsWriter>(cfg.metrics, !cfg.resume.empty());
    }
    auto pg = distributed::init_process_group(backend, pg_options);
    rank = pg->rank();
    const int world = pg->size();
    examples::use_threads(cfg, "ddp_resnet", local ? std::atoi(local) : world, rank == 0);
    if (!cfg.lr_given) cfg.lr = optimizer == "adamw" ? 1e-3 * world : 0.1 * world;
    manual_seed(cfg.seed);
    const auto resume = examples::read_resume_checkpoint(cfg);  // bad files fail before any work
    examples::FashionMnist data = examples::load_fashion_mnist(cfg);
    auto model = examples::make_resnet(cfg);
    model->to(device);
    distributed::DDPOptions ddp_options;
    ddp_options.straggler_check_every = straggler_check_every;
    if (bucket_cap_mb > 0) ddp_options.bucket_cap_mb = bucket_cap_mb;
    if (first_bucket_mb > 0) ddp_options.first_bucket_mb = first_bucket_mb;
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, ddp_options);
    auto sampler = std::make_shared<data::DistributedSampler>(data.train->size(), world, rank, true, cfg.seed,
                                                              /*drop_last=*/true);
    data::DataLoader loader(data.train, data::DataLoaderOptions{cfg.batch, false, cfg.seed + rank, true, true, 2},
                            examples::train_transforms(cfg), sampler);
    const int64_t steps = cfg.max_steps > 0 ? std::min(cfg.max_steps, loader.num_batches()) : loader.num_batches();
    // PowerSGD's minimum start is 2 (buckets are rebuilt after the first iteration).
    if (hook.powersgd_start_iter < 0) hook.powersgd_start_iter = std::max<int64_t>(2, cfg.epochs * steps / 10);
    auto powersgd = zero_overlap ? nullptr : examples::register_comm_hook_by_name(*ddp, pg, hook);
    std::unique_ptr<optim::Optimizer> opt = make_optimizer(cfg, optimizer, zero, zero_overlap, *ddp, pg);
    if (zero_overlap) {
      ddp->register_comm_hook(
          std::make_unique<distributed::ZeroStepCommHook>(static_cast<distributed::ZeroRedundancyOptimizer&>(*opt)));
      hook.name = "zero_step";
    }
    optim::CosineAnnealingLR schedule(*opt, cfg.epochs * steps);
    // Every rank restores the same shared state; PowerSGD's error feedback is per rank.
    examples::TrainState state{model.get(), opt.get(), &schedule};
    if (zero) {
      // Every rank sends its shard to rank 0, which writes the whole (unsharded) state.
      state.before_save = [&opt] { static_cast<distributed::ZeroRedundancyOptimizer&>(*opt).consolidate_state_dict(0); };
    }
    state.wrapper_state = [&] { return bucket_layout_state(*ddp); };
    state.load_wrapper_state = [&](const nn::StateDict& sd) { load_bucket_layout_state(*ddp, sd); };
    if (powersgd) {
      state.per_rank_state = [&] { return powersgd->state_dict(); };
      state.load_per_rank_state = [&](const nn::StateDict& sd) { powersgd->load_state_dict(sd, pg); };
    }
    const examples::TrainShape shape{cfg.seed, world, cfg.batch, steps};
    examples::TrainPosition pos = examples::resume_from(resume, state, shape, rank, rank == 0);
    examples::CheckpointWriter writer({cfg.checkpoint, rank, [&pg] { pg->barrier()->wait(); }, !cfg.checkpoint_in_line});
    const auto checkpoint_actions = examples::after_step_actions(cfg, writer, state, shape, rank);
    // Note [Straggler check]: rank 0 reports the first check and each that names other ranks than the last.
    int64_t reported_check = -1;
    std::string reported_verdict;  // the first check is always reported
    const auto after_step = [&](const examples::TrainPosition& p) {
      if (checkpoint_actions) checkpoint_actions(p);
      const distributed::StragglerReport& r = ddp->straggler_report();
      if (rank != 0 || r.iteration == reported_check) return;
      reported_check = r.iteration;
      const std::string verdict = distributed::rank_list(r.slow_link_ranks) + "|" +
                                  distributed::rank_list(r.slow_compute_ranks);  // who, not how much
      if (verdict == reported_verdict) return;
      reported_verdict = verdict;
      if (r.found()) {
        std::fprintf(stderr, "[rank 0] ddp_resnet: straggler check at iteration %lld: %s\n",
                     (long long)r.iteration, r.summary.c_str());
      } else {
        std::fprintf(stderr, "[rank 0] ddp_resnet: straggler check at iteration %lld: no straggler (median link "
                     "%.1f MB/s between hosts, median compute %.1f ms)\n",
                     (long long)r.iteration, r.median_link_mb_s, r.median_compute_ms);
      }
    };
    int64_t grad_bytes = 0;
    for (const Tensor& p : ddp->parameters()) grad_bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    nn::CrossEntropyLoss criterion(Reduction::kMean, cfg.label_smoothing);
    if (rank == 0) {
      auto d = ddp->get_ddp_logging_data();
      std::fprintf(stderr, "DDP: %d ranks on %s over %s, ResNet-%lld, batch %lld per rank, %s%s lr %.3g, %lld buckets, "
                   "%lld steps/epoch, comm hook %s, timeout %llds\n",
                   world, device.str().c_str(), backend.c_str(), (long long)cfg.depth, (long long)cfg.batch,
                   optimizer.c_str(), zero ? (zero_overlap ? " (ZeRO-1, overlapped)" : " (ZeRO-1)") : "",
                   schedule.base_lrs().empty() ? cfg.lr : schedule.base_lrs()[0],  // a resumed run's is the checkpoint's
                   (long long)d.num_buckets, (long long)steps, hook.name.c_str(), (long long)timeout_s);
    }
    // --metrics: rank 0 writes a row per step with DDP's overlap and the bytes it sent in the step.
    uint64_t bytes_at_last_step = 0;
    const auto step_extras = [&](examples::StepMetrics& m) {
      const distributed::IterationStats& last = ddp->reducer().last_iteration_stats();
      m.overlap = last.overlap;
      m.comm_wall_ms = last.comm_wall_ms;
      m.exposed_comm_ms = last.exposed_comm_ms;
      const uint64_t now = pg->payload_bytes();
      m.bytes_sent = static_cast<int64_t>(now - bytes_at_last_step);
      bytes_at_last_step = now;
    };
    double train_seconds = 0, acc = 0, bytes_per_step = 0;
    int64_t trained_steps = 0;
    for (; pos.epoch < cfg.epochs; ++pos.epoch, pos.step = 0) {
      const uint64_t bytes_before = pg->payload_bytes();
      bytes_at_last_step = bytes_before;  // the evaluation's allreduce is no step's
      examples::EpochOptions eo{pos.epoch, cfg.epochs, steps, pos, world * cfg.batch, rank == 0, after_step};
      eo.metrics = metrics.get();
      eo.before_backward = [&writer] { writer.wait_for_write(); };
      eo.step_extras = step_extras;
      examples::EpochStats st = examples::train_epoch(*ddp, loader, *opt, schedule, criterion, eo);
      pos.global_step += st.steps;
      bytes_per_step = st.steps ? static_cast<double>(pg->payload_bytes() - bytes_before) / st.steps : 0.0;
      train_seconds += st.seconds;
      trained_steps += st.steps;
      // Each rank evaluates a contiguous slice of the test set; the counts are summed.
      const int64_t n = data.test->size();
      Tensor correct = from_vector<int64_t>(
          {examples::count_correct(*model, data.test, n * rank / world, n * (rank + 1) / world)});
      std::vector<Tensor> t{correct.to(pg->collective_device())};
      pg->allreduce(t)->wait();
      acc = static_cast<double>(t[0].item<int64_t>()) / static_cast<double>(n);
      if (rank == 0) {
        auto d = ddp->get_ddp_logging_data();
        std::printf("epoch %lld: train loss %.4f, test accuracy %.4f (comm overlap %.0f%%)\n",
                    (long long)(pos.epoch + 1), st.loss, acc, 100 * d.last.overlap);
        std::fflush(stdout);
      }
      if (!cfg.checkpoint.empty()) writer.save(state, {pos.epoch, steps, pos.global_step}, shape);
    }
    writer.wait_for_write();  // the last checkpoint is in place before the RESULT line
    if (rank == 0) {
      std::printf("RESULT test_acc=%.4f img_per_s=%.1f ms_per_step=%.2f comm_hook=%s bytes_per_step=%.0f "
                  "compression=%.2f",
                  acc, trained_steps ? world * trained_steps * cfg.batch / train_seconds : 0.0,
                  trained_steps ? 1000.0 * train_seconds / trained_steps : 0.0, hook.name.c_str(), bytes_per_step,
                  bytes_per_step > 0 ? static_cast<double>(grad_bytes) / bytes_per_step : 0.0);
      if (powersgd) {
        auto [rate, before, after] = powersgd->compression_stats();
        std::printf(" powersgd_rank=%lld powersgd_start_iter=%lld powersgd_rate=%.2f",
                    (long long)powersgd->matrix_approximation_rank, (long long)powersgd->start_powerSGD_iter, rate);
      }
      std::printf("\n");
      const std::string cost =
          examples::checkpoint_cost_summary(writer.cost(), 1000.0 * train_seconds, trained_steps, cfg.checkpoint_every);
      if (!cost.empty()) std::fprintf(stderr, "%s\n", cost.c_str());
    }
    ddp.reset();
    distributed::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    // Every rank parses the same command line: one report of a bad flag is enough.
    if (!flags_parsed && rank != 0) return 1;
    flags::report_rank_error(rank, "ddp_resnet", e.what());
    return 1;
  }
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
