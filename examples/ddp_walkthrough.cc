// A guided tour of one DDP iteration for students (docs/how-ddp-works.md). Run under mpirun:
//   mpirun -np 2 bazel-bin/examples/ddp_walkthrough [--bucket_cap_mb=0.2 --first_bucket_mb=0.05]
//       [--find_unused_parameters]
// It prints the parameter list with its bucket assignment (docs/design.md steps 1-5), then narrates
// one training iteration from rank 0's point of view — forward, every autograd hook, each
// bucket's launch and completion, finalize — with timestamps, so the overlap of communication
// with the rest of backward is visible. Each rank trains on its own rows of a fixed global batch:
// the walkthrough shows the ranks' local gradients differing, the averaged ones agreeing, and the
// parameters after the last step matching one process that trained on the whole global batch.
// With --find_unused_parameters the model has two more heads, one that only rank 1 uses and one
// that no rank uses, and the listing shows the unused-parameter path (steps 7, 8, 11 and 12).
// Set EMBER_DDP_TRACE=<dir> for a Chrome trace as well.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include <iostream>
#include <mutex>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/common/flags.h"
#include "examples/common/shard_losses.h"

namespace ember::examples {

namespace {

// The docs/design.md step a narrated event belongs to (docs/how-ddp-works.md walks through them).
const char* design_step(const std::string& event) {
  auto starts = [&event](const char* prefix) { return event.rfind(prefix, 0) == 0; };
  if (event.find("used-parameter map") != std::string::npos) {
    return "step 11: the used-parameter map's allreduce, after the last bucket";
  }
  if (starts("search_unused_parameters")) return "step 7: the graph search from the outputs";
  if (starts("first hook marks")) return "step 8: unused here, so ready at once (their slots hold zeros)";
  if (starts("DDPSinkBackward")) return "steps 7-8: DDP's sink: backward reaches every output together";
  if (starts("DDP forward")) return "steps 6-7: DistributedDataParallel::forward";
  if (starts("prepare_for_backward")) return "step 7: Reducer::prepare_for_backward";
  if (starts("autograd_hook")) return "steps 8-9: Reducer::autograd_hook -> mark_variable_ready";
  if (starts("allreduce bucket")) return "step 10: mark_bucket_ready launched it; done on the comm thread";
  if (starts("finalize_backward")) return "steps 11-12: Reducer::finalize_backward";
  if (starts("AccumulateGrad")) return "autograd: writes .grad, then runs the hook";
  if (event.find("(MPI)") != std::string::npos) return "the MPI worker ran the allreduce: start to end";
  return "autograd: a backward op";
}

// One number from every rank, gathered to all (each rank contributes `mine`).
std::vector<double> from_every_rank(distributed::ProcessGroup& pg, double mine) {
  std::vector<Tensor> in{from_vector<double>({mine})};
  std::vector<std::vector<Tensor>> out(1);
  for (int r = 0; r < pg.size(); ++r) out[0].push_back(zeros({1}, kFloat64));
  pg.allgather(out, in)->wait();
  std::vector<double> values;
  for (const Tensor& t : out[0]) values.push_back(t.item<double>());
  return values;
}

double norm(const Tensor& t) { return std::sqrt(sum(mul(t, t)).item<double>()); }

void print_per_rank(const char* what, const std::vector<double>& values) {
  std::printf("  %-44s", what);
  for (size_t r = 0; r < values.size(); ++r) std::printf("  rank %zu: %.6f", r, values[r]);
  std::printf("\n");
}

// The model of --find_unused_parameters: the MLP, and beside it two heads on the input: `aux`,
// which only rank 1's forward uses (a branch used on one rank), and `spare`, which no forward uses.
struct MlpWithHeads : nn::Module {
  std::shared_ptr<nn::Module> mlp;
  std::shared_ptr<nn::Linear> aux, spare;
  bool use_aux = false;
  explicit MlpWithHeads(Generator* gen) : nn::Module("MlpWithHeads") {
    mlp = register_module("mlp", nn::make_mlp({64, 256, 256, 128, 10}, gen));
    aux = register_module("aux", std::make_shared<nn::Linear>(64, 10, true, gen));
    spare = register_module("spare", std::make_shared<nn::Linear>(64, 10, true, gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = mlp->forward(x);
    return use_aux ? add(out, aux->forward(x)) : out;
  }
};

// What became of the two heads' gradients after the narrated iteration (step 12), on every rank.
struct HeadsAfter {
  std::vector<double> aux_norms;      // |grad aux.weight|
  std::vector<double> spare_defined;  // 1 where spare.weight has a .grad
};

HeadsAfter gather_heads(distributed::ProcessGroup& pg, const MlpWithHeads& m) {
  return HeadsAfter{from_every_rank(pg, norm(m.aux->weight().grad())),
                    from_every_rank(pg, m.spare->weight().grad().defined() ? 1 : 0)};
}

void print_heads(const HeadsAfter& h) {
  std::printf("\n== Unused parameters (find_unused_parameters): aux is used on rank 1 only, spare on no rank\n");
  print_per_rank("|grad aux.weight| after (rank 1's, averaged)", h.aux_norms);
  const bool untouched = std::all_of(h.spare_defined.begin(), h.spare_defined.end(), [](double d) { return d == 0; });
  std::printf("  spare.weight .grad: %s\n",
              untouched ? "left untouched on every rank (undefined: no rank used it)" : "written on some rank");
}

}  // namespace

int example_main(int argc, char** argv) {
  double bucket_cap_mb = 0.2;      // small buckets so a small model still has several
  double first_bucket_mb = 0.05;
  bool find_unused_parameters = false;
  flags::CommandLine cli("A narrated DDP iteration (docs/how-ddp-works.md). Run under mpirun.", "ddp_walkthrough");
  cli.add_option("--bucket_cap_mb", bucket_cap_mb, "DDPOptions::bucket_cap_mb after the rebuild (MiB)")
      ->check(flags::number_in(1e-6, 1e6, "a size in MiB"));
  cli.add_option("--first_bucket_mb", first_bucket_mb, "DDPOptions::first_bucket_mb (MiB)")
      ->check(flags::number_in(1e-6, 1e6, "a size in MiB"));
  cli.add_flag("--find_unused_parameters", find_unused_parameters,
               "DDPOptions::find_unused_parameters, with a head only rank 1 uses and one no rank uses");
  try {
    if (cli.parse(argc, argv, flags::launcher_rank() == 0) == flags::Parsed::kHelp) return 0;
  } catch (const std::exception& e) {
    if (flags::launcher_rank() == 0) std::fprintf(stderr, "ddp_walkthrough: %s\n", e.what());
    return 1;
  }
  distributed::DDPOptions options;
  options.bucket_cap_mb = bucket_cap_mb;
  options.first_bucket_mb = first_bucket_mb;
  options.find_unused_parameters = find_unused_parameters;
  auto pg = distributed::init_process_group("mpi");
  const int rank = pg->rank(), world = pg->size();
  // Every rank builds the same model (the constructor's broadcast would make it so anyway) and
  // the same fixed global batch; rank r trains on rows [r * kRowsPerRank, (r + 1) * kRowsPerRank).
  constexpr int64_t kRowsPerRank = 32;
  constexpr int kSteps = 3;
  constexpr double kLr = 0.05;
  Generator gen(0);
  Generator ref_gen(0);
  std::shared_ptr<nn::Module> model, reference;  // reference: one process, whole batch
  std::shared_ptr<MlpWithHeads> with_heads, reference_with_heads;
  if (find_unused_parameters) {
    model = with_heads = std::make_shared<MlpWithHeads>(&gen);
    with_heads->use_aux = rank == 1;
    reference = reference_with_heads = std::make_shared<MlpWithHeads>(&ref_gen);
  } else {
    model = nn::make_mlp({64, 256, 256, 128, 10}, &gen);
    reference = nn::make_mlp({64, 256, 256, 128, 10}, &ref_gen);
  }
  Generator data_gen(1);
  const Tensor global_x = randn({world * kRowsPerRank, 64}, &data_gen);
  const Tensor global_y = randint(0, 10, {world * kRowsPerRank}, &data_gen);
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
    if (find_unused_parameters) {
      std::printf("first iteration: buckets by size in reverse parameter order, as PyTorch does when\n"
                  "find_unused_parameters is on\n");
    } else {
      std::printf("first iteration: every parameter in one bucket (per dtype), as PyTorch does when\n"
                  "find_unused_parameters is off -- parameter order is not yet known to be gradient order\n");
    }
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
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(kLr));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(kLr));
  const Tensor x = global_x.narrow(0, rank * kRowsPerRank, kRowsPerRank);
  const Tensor y = global_y.narrow(0, rank * kRowsPerRank, kRowsPerRank);
  struct Event {
    double ts;
    int lane;
    std::string what;
  };
  // The listener runs on the training thread and on the MPI worker (bucket completions, the
  // worker's own spans): the list is shared, so it is locked.
  std::mutex events_mutex;
  std::vector<Event> events;
  auto iteration = [&](bool narrate) {
    const double t0 = distributed::Trace::now_us();
    if (narrate && rank == 0) {
      // Spans arrive when they end; collect everything and print in start order afterwards.
      distributed::Trace::get().set_listener([&events, &events_mutex, t0](const std::string& what, double ts,
                                                                           int lane) {
        std::lock_guard<std::mutex> lock(events_mutex);
        if (ts >= t0) events.push_back(Event{ts - t0, lane, what});
      });
    }
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(ddp->forward(x), y);
    loss.backward();
    distributed::Trace::get().set_listener(nullptr);
  };
  // The same step in one process on the whole global batch: the mean loss over all rows has the
  // gradient DDP's averaging computes from the ranks' mean losses over their rows.
  auto reference_step = [&] {
    ref_opt.zero_grad();
    if (reference_with_heads) {
      // Rank r's shard through the model as rank r runs it (aux on rank 1 only).
      mean_of_shard_losses(*reference, global_x, global_y, world, kRowsPerRank,
                           [&](int r) { reference_with_heads->use_aux = r == 1; })
          .backward();
    } else {
      nn::functional::cross_entropy(reference->forward(global_x), global_y).backward();
    }
    ref_opt.step();
  };
  iteration(false);  // first iteration: buckets are rebuilt in the observed gradient order after it
  opt.step();
  reference_step();
  iteration(false);  // the rebuild happens at this forward
  opt.step();
  reference_step();
  if (rank == 0) {
    auto d = ddp->get_ddp_logging_data();
    std::printf("\n== Buckets rebuilt before the second forward (step 13), in the gradient order observed,\n"
                "   first bucket cap %.2f MiB, then %.2f MiB:\n", first_bucket_mb, bucket_cap_mb);
    print_buckets(d.bucket_indices, d.bucket_sizes);
    std::printf("\n== One iteration (steps 6-12), rank 0's view; times from the start of forward\n");
    std::printf("  (autograd_hook = step 8; 'allreduce bucket i' spans run on the communication\n");
    std::printf("   thread from launch (step 10) to completion; finalize_backward = step 12)\n");
  }
  // Before the narrated iteration, the same forward and backward under no_sync: .grad then holds
  // this rank's local gradient, from its own rows only, which differs from rank to rank.
  const Tensor watched = ddp->parameters()[0];
  const std::string watched_name = ddp->parameter_names()[0];
  Tensor local_grad;
  {
    auto guard = ddp->no_sync();
    opt.zero_grad();
    nn::functional::cross_entropy(ddp->forward(x), y).backward();
    local_grad = watched.grad().clone();
  }
  iteration(true);
  const Tensor averaged = watched.grad().clone();
  // The averaged gradient is the mean of the local ones: allreduce them here to check.
  std::vector<Tensor> mean_of_local{local_grad.clone()};
  pg->allreduce(mean_of_local)->wait();
  const double averaging_error = max(abs(sub(mul(mean_of_local[0], 1.0 / world), averaged))).item<double>();
  const std::vector<double> local_norms = from_every_rank(*pg, norm(local_grad));
  const std::vector<double> averaged_norms = from_every_rank(*pg, norm(averaged));
  opt.step();
  reference_step();
  double max_diff = 0;
  for (size_t i = 0; i < reference->parameters().size(); ++i) {
    max_diff = std::max(max_diff, max(abs(sub(model->parameters()[i], reference->parameters()[i]))).item<double>());
  }
  const std::vector<double> diffs = from_every_rank(*pg, max_diff);
  const HeadsAfter heads = with_heads ? gather_heads(*pg, *with_heads) : HeadsAfter{};
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(events_mutex);
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
    for (const Event& e : events) {
      const char* lane = e.lane == 0 ? "[compute]" : e.lane == 3 ? "[mpi]" : "[comm]";
      std::printf("  %8.3f ms  %-11s %-36s %s\n", e.ts / 1000.0, lane,
                  e.what.c_str(), design_step(e.what));
    }
    auto d = ddp->get_ddp_logging_data();
    // Note [Communication time] in distributed/ddp_reports/logging.h.
    std::printf("backward %.2f ms; communication %.2f ms of wall time (the union of the bucket spans), "
                "%.2f ms of it after the last gradient was ready (finalize waited): overlap %.0f%%\n",
                d.last.backward_ms, d.last.comm_wall_ms, d.last.exposed_comm_ms, 100 * d.last.overlap);

    std::printf("\n== Averaging (step 10's allreduce): each rank trains on its own %lld rows of a global "
                "batch of %lld\n", (long long)kRowsPerRank, (long long)(world * kRowsPerRank));
    print_per_rank(("|grad " + watched_name + "| local, before allreduce").c_str(), local_norms);
    print_per_rank(("|grad " + watched_name + "| averaged, after").c_str(), averaged_norms);
    std::printf("  averaged gradient = mean of the local ones: max |difference| %.2e\n", averaging_error);
    if (with_heads) print_heads(heads);
    std::printf("\n== After %d steps: max |parameter difference| from one process that trained on the whole "
                "global batch:", kSteps);
    for (size_t r = 0; r < diffs.size(); ++r) std::printf(" rank %zu: %.2e", r, diffs[r]);
    std::printf("\nRESULT max_abs_diff_vs_single=%.3e averaging_error=%.3e\n",
                *std::max_element(diffs.begin(), diffs.end()), averaging_error);
  }
  ddp.reset();
  distributed::destroy_process_group();
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
