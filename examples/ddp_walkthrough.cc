// A guided tour of one DDP iteration for students (docs/how-ddp-works.md). Run under mpirun:
//   mpirun -np 2 bazel-bin/examples/ddp_walkthrough [--bucket_cap_mb=0.2 --first_bucket_mb=0.05]
// It prints the parameter list with its bucket assignment (DESIGN.md steps 1-5), then narrates
// one training iteration from rank 0's point of view — forward, every autograd hook, each
// bucket's launch and completion, finalize — with timestamps, so the overlap of communication
// with the rest of backward is visible. Set EMBER_DDP_TRACE=<dir> for a Chrome trace as well.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include <iostream>

#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/distributed.h"
#include "distributed/trace.h"
#include "examples/common/flags.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/all.h"

using namespace ember;

namespace {

// The DESIGN.md step a narrated event belongs to (docs/how-ddp-works.md walks through them).
const char* design_step(const std::string& event) {
  auto starts = [&event](const char* prefix) { return event.rfind(prefix, 0) == 0; };
  if (starts("DDP forward")) return "steps 6-7: DistributedDataParallel::forward";
  if (starts("prepare_for_backward")) return "step 7: Reducer::prepare_for_backward";
  if (starts("autograd_hook")) return "steps 8-9: Reducer::autograd_hook -> mark_variable_ready";
  if (starts("allreduce bucket")) return "step 10: mark_bucket_ready launched it; done on the comm thread";
  if (starts("finalize_backward")) return "steps 11-12: Reducer::finalize_backward";
  if (starts("AccumulateGrad")) return "autograd: writes .grad, then runs the hook";
  return "autograd: a backward op";
}

}  // namespace

int main(int argc, char** argv) {
  distributed::DDPOptions options;
  options.bucket_cap_mb = 0.2;      // small buckets so a small model still has several
  options.first_bucket_mb = 0.05;
  flags::CommandLine cli("A narrated DDP iteration (docs/how-ddp-works.md). Run under mpirun.", "ddp_walkthrough");
  cli.add_option("--bucket_cap_mb", options.bucket_cap_mb, "DDPOptions::bucket_cap_mb after the rebuild")
      ->check(flags::number_in(1e-6, 1e6, "a size in MB"));
  cli.add_option("--first_bucket_mb", options.first_bucket_mb, "DDPOptions::first_bucket_mb")
      ->check(flags::number_in(1e-6, 1e6, "a size in MB"));
  try {
    if (cli.parse(argc, argv, flags::launcher_rank() == 0) == flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    if (flags::launcher_rank() == 0) std::fprintf(stderr, "ddp_walkthrough: %s\n", e.what());
    return 1;
  }
  auto pg = distributed::init_process_group("mpi");
  const int rank = pg->rank();
  Generator gen(0);
  auto model = nn::make_mlp({64, 256, 256, 128, 10}, &gen);
  auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, options);
  if (rank == 0) {
    std::printf("== Construction (steps 1-5)\n");
    std::printf("world size %d; parameters in forward order:\n", pg->size());
    const auto& names = ddp->parameter_names();
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      std::printf("  [%zu] %-10s %-14s %8zu bytes\n", i, names[i].c_str(), params[i].shape_str().c_str(),
                  params[i].nbytes());
    }
    std::printf("first iteration: every parameter in one bucket (per dtype), as PyTorch does when\n"
                "find_unused_parameters is off -- parameter order is not yet known to be gradient order\n");
  }
  // The bucket layout, in launch order.
  auto print_buckets = [&](const std::vector<std::vector<size_t>>& indices, const std::vector<int64_t>& sizes) {
    const auto& names = ddp->parameter_names();
    for (size_t b = 0; b < indices.size(); ++b) {
      std::printf("  bucket %zu: %7lld bytes, params", b, (long long)sizes[b]);
      for (size_t i : indices[b]) std::printf(" %s", names[i].c_str());
      std::printf("\n");
    }
  };
  if (rank == 0) {
    auto d = ddp->get_ddp_logging_data();
    print_buckets(d.initial_bucket_indices, d.initial_bucket_sizes);
  }
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.05));
  Tensor x = randn({32, 64}, &gen), y = randint(0, 10, {32}, &gen);
  struct Event {
    double ts;
    int lane;
    std::string what;
  };
  std::vector<Event> events;
  auto iteration = [&](bool narrate) {
    const double t0 = distributed::Trace::now_us();
    if (narrate && rank == 0) {
      // Spans arrive when they end; collect everything and print in start order afterwards.
      distributed::Trace::get().set_listener([&events, t0](const std::string& what, double ts, int lane) {
        if (ts >= t0) events.push_back(Event{ts - t0, lane, what});
      });
    }
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(ddp->forward(x), y);
    loss.backward();
    opt.step();
    distributed::Trace::get().set_listener(nullptr);
  };
  iteration(false);  // first iteration: buckets are rebuilt in the observed gradient order after it
  iteration(false);  // the rebuild happens at this forward
  if (rank == 0) {
    auto d = ddp->get_ddp_logging_data();
    std::printf("\n== Buckets rebuilt before the second forward (step 13), in the gradient order observed,\n"
                "   first bucket cap %.2f MB, then %.2f MB:\n", options.first_bucket_mb, options.bucket_cap_mb);
    print_buckets(d.bucket_indices, d.bucket_sizes);
    std::printf("\n== One iteration (steps 6-12), rank 0's view; times from the start of forward\n");
    std::printf("  (autograd_hook = step 8; 'allreduce bucket i' spans run on the communication\n");
    std::printf("   thread from launch (step 10) to completion; finalize_backward = step 12)\n");
  }
  iteration(true);
  if (rank == 0) {
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
    for (const Event& e : events) {
      std::printf("  %8.3f ms  %-11s %-36s %s\n", e.ts / 1000.0, e.lane == 0 ? "[compute]" : "[comm]",
                  e.what.c_str(), design_step(e.what));
    }
    auto d = ddp->get_ddp_logging_data();
    std::printf("backward %.2f ms, communication %.2f ms, waited in finalize %.2f ms, overlap %.0f%%\n",
                d.last.backward_ms, d.last.comm_ms, d.last.comm_wait_ms, 100 * d.last.overlap_fraction);
  }
  ddp.reset();
  distributed::destroy_process_group();
  return 0;
}
