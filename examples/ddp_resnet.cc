// Trains ResNet-20 on Fashion-MNIST with DistributedDataParallel under mpirun (the main job):
//   mpirun -np 2 bazel-bin/examples/ddp_resnet --epochs=5 [--comm_hook=powersgd --powersgd_rank=4]
// Every rank reads its DistributedSampler shard with a per-rank batch; DDP averages gradients
// with bucketed allreduces overlapped with backward (through a comm hook when one is chosen).
// Rank 0 shows progress, evaluation is split across ranks, rank 0 writes checkpoints (each rank
// adds its own PowerSGD state next to it: error feedback is per rank) and the final line
//   RESULT test_acc=... img_per_s=... ms_per_step=... comm_hook=... bytes_per_step=... compression=...
// (img/s counts all ranks; bytes_per_step: payload this rank handed to collectives per step in the
// last epoch; compression: the model's fp32 gradient bytes / bytes_per_step).
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/distributed.h"
#include "examples/common/comm_hook_by_name.h"
#include "examples/common/training.h"
#include "nn/checkpoint.h"
#include "tensor/all.h"

using namespace ember;

int main(int argc, char** argv) {
  int rank = 0;
  try {
    bool help = false;
    examples::CommHookSpec hook;
    hook.powersgd_start_iter = -1;
    std::map<std::string, examples::Flag> ddp_flags = {
        {"comm_hook", {"communication hook (none):\n" + examples::comm_hook_help("      "),
                       [&](const std::string& v) { hook.name = v; }}},
        {"powersgd_rank", {"PowerSGD matrix_approximation_rank (1)",
                           [&](const std::string& v) { hook.powersgd_rank = std::stoll(v); }}},
        {"powersgd_start_iter", {"PowerSGD start_powerSGD_iter (-1: 10% of the training steps)",
                                 [&](const std::string& v) { hook.powersgd_start_iter = std::stoll(v); }}},
    };
    // Linear scaling: the global batch grows with the world size, so does the default peak lr.
    examples::TrainConfig cfg = examples::parse_flags(argc, argv, "ddp_resnet", &help, ddp_flags);
    if (help) return 0;
    auto pg = distributed::init_process_group("mpi");
    rank = pg->rank();
    const int world = pg->size();
    // Processes on this host: Open MPI says; otherwise assume the whole job is here.
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    examples::use_threads(cfg, "ddp_resnet", local ? std::atoi(local) : world, rank == 0);
    bool lr_given = false;
    for (int i = 1; i < argc; ++i) lr_given = lr_given || std::string(argv[i]).rfind("--lr", 0) == 0;
    if (!lr_given) cfg.lr = 0.1 * world;
    manual_seed(cfg.seed);
    examples::FashionMnist data = examples::load_fashion_mnist(cfg);
    auto model = examples::make_resnet(cfg);
    auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, distributed::DDPOptions{});
    auto sampler = std::make_shared<data::DistributedSampler>(data.train->size(), world, rank, true, cfg.seed,
                                                              /*drop_last=*/true);
    data::DataLoader loader(data.train, data::DataLoaderOptions{cfg.batch, false, cfg.seed + rank, true, true, 2},
                            examples::train_transforms(cfg), sampler);
    const int64_t steps = cfg.max_steps > 0 ? std::min(cfg.max_steps, loader.num_batches()) : loader.num_batches();
    // PowerSGD's minimum start is 2 (buckets are rebuilt after the first iteration).
    if (hook.powersgd_start_iter < 0) hook.powersgd_start_iter = std::max<int64_t>(2, cfg.epochs * steps / 10);
    auto powersgd = examples::register_comm_hook_by_name(*ddp, pg, hook);
    optim::SGD opt = examples::make_sgd(cfg, ddp->parameters());
    optim::CosineAnnealingLR schedule(opt, cfg.epochs * steps);
    // Every rank loads the same file; DDP keeps them identical from there on.
    const int64_t start_epoch = examples::resume_if_requested(cfg, *model, opt, schedule, steps, rank == 0);
    // Error feedback is per rank: each rank keeps its PowerSGD state next to the checkpoint.
    auto powersgd_file = [rank](const std::string& checkpoint) {
      return checkpoint + ".powersgd.rank" + std::to_string(rank);
    };
    if (powersgd && !cfg.resume.empty()) powersgd->load_state_dict(nn::load(powersgd_file(cfg.resume)), pg);
    int64_t grad_bytes = 0;
    for (const Tensor& p : ddp->parameters()) grad_bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    nn::CrossEntropyLoss criterion(Reduction::Mean, cfg.label_smoothing);
    if (rank == 0) {
      auto d = ddp->get_ddp_logging_data();
      std::fprintf(stderr, "DDP: %d ranks, ResNet-%lld, batch %lld per rank, lr %.3g, %lld buckets, %lld steps/epoch, "
                   "comm hook %s\n",
                   world, (long long)cfg.depth, (long long)cfg.batch, cfg.lr, (long long)d.num_buckets,
                   (long long)steps, hook.name.c_str());
    }
    double train_seconds = 0, acc = 0, bytes_per_step = 0;
    int64_t trained_steps = 0;
    for (int64_t epoch = start_epoch; epoch < cfg.epochs; ++epoch) {
      const uint64_t bytes_before = pg->payload_bytes();
      examples::EpochStats st = examples::train_epoch(*ddp, loader, opt, schedule, criterion, epoch,
                                                      cfg.epochs, steps, world * cfg.batch, rank == 0);
      bytes_per_step = st.steps ? static_cast<double>(pg->payload_bytes() - bytes_before) / st.steps : 0.0;
      const double running = st.loss;
      train_seconds += st.seconds;
      trained_steps += st.steps;
      // Each rank evaluates a contiguous slice of the test set; the counts are summed.
      const int64_t n = data.test->size();
      Tensor correct = from_vector<int64_t>(
          {examples::count_correct(*model, data.test, n * rank / world, n * (rank + 1) / world)});
      std::vector<Tensor> t{correct};
      pg->allreduce(t)->wait();
      acc = static_cast<double>(correct.item<int64_t>()) / static_cast<double>(n);
      if (rank == 0) {
        auto d = ddp->get_ddp_logging_data();
        std::printf("epoch %lld: train loss %.4f, test accuracy %.4f (comm overlap %.0f%%)\n",
                    (long long)(epoch + 1), running, acc, 100 * d.last.overlap_fraction);
        std::fflush(stdout);
        if (!cfg.checkpoint.empty()) examples::save_checkpoint(cfg.checkpoint, *model, opt, epoch + 1);
      }
      if (powersgd && !cfg.checkpoint.empty()) nn::save(powersgd->state_dict(), powersgd_file(cfg.checkpoint));
    }
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
    }
    ddp.reset();
    distributed::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "[rank " << rank << "] ddp_resnet: " << e.what() << "\n";
    return 1;
  }
}
