// DDP from nothing, in stages (docs/ddp-from-scratch.md): data-parallel training written with only
// a ProcessGroup and autograd hooks, one idea at a time, then ember's DistributedDataParallel.
//   mpirun -np 2 bazel-bin/examples/ddp_from_scratch
//       --stage=naive|flat|overlap|buckets|broadcast|callback|unused|ddp
// Up to buckets every rank builds the same model (same seed); from broadcast on each rank seeds its
// own and rank 0's parameters are broadcast. Every rank draws the same global batch each step; rank
// r trains on its rows. Rank 0 then trains a copy on whole batches in one process and prints one
// line "RESULT stage=S max_abs_diff_vs_single=D ms_per_step=M comm_wall_ms=C exposed_comm_ms=E
// allreduces_per_step=N": the stages differ in how and when gradients are averaged, not in what.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ember/distributed.h>
#include <ember/optim.h>

#include "examples/common/flags.h"
#include "examples/common/shard_losses.h"

namespace ember::examples {

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Launches gradient allreduces and times them. Every allreduce is asynchronous and averages in
// place (ReduceOp::kAvg: the MPI backend sums, then divides by the world size on its worker).
class Comm {
 public:
  explicit Comm(distributed::ProcessGroupPtr pg) : pg_(std::move(pg)) {}
  void launch(Tensor t) {
    std::vector<Tensor> tensors{std::move(t)};
    const double begin = now_ms();
    auto end = std::make_shared<double>(0);
    auto work = pg_->allreduce(tensors, {distributed::ReduceOp::kAvg});
    // then() runs on the worker as the allreduce completes: the completion time, not when we look.
    spans_.push_back({begin, end, work->get_future()->then([end](distributed::Future& f) {
                        *end = now_ms();
                        return f.const_value();
                      })});
  }
  // Blocks until every launched allreduce has completed.
  void wait_all() {
    if (wait_began_ < 0) wait_began_ = now_ms();
    for (const Span& s : spans_) s.done->wait();
  }
  size_t launched() const { return spans_.size(); }
  void clear() { spans_.clear(), wait_began_ = -1; }
  // When this step first waited for its allreduces: backward's end, or the first collective after
  // it. What was in flight from then on is what overlap did not hide.
  double wait_began() const { return wait_began_; }
  // The union of [launch, completion] over this step's allreduces, counted from `from` on: time
  // with a collective in flight, measured as DDP measures its buckets (Note [Communication time]).
  double wall_ms(double from = 0) const {
    std::vector<std::pair<double, double>> spans;
    for (const Span& s : spans_) spans.emplace_back(s.begin, *s.end);
    return distributed::covered_length(std::move(spans), from);
  }
 private:
  struct Span {
    double begin;
    std::shared_ptr<double> end;  // written by the worker before `done` completes
    distributed::FuturePtr done;
  };
  distributed::ProcessGroupPtr pg_;
  std::vector<Span> spans_;
  double wait_began_ = -1;
};

// Stage naive: after backward, one blocking allreduce per parameter. Each message pays the full
// latency, one after the other, and nothing overlaps backward.
void allreduce_naive(Comm& comm, const std::vector<Tensor>& params) {
  for (const Tensor& p : params) {
    comm.launch(p.grad());
    comm.wait_all();
  }
}

// Stage flat: every gradient copied into one buffer, one allreduce, copied back. One latency
// instead of one per parameter, for two extra copies; still after backward.
void allreduce_flat(Comm& comm, const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad().flatten());
  Tensor flat = cat(grads);
  comm.launch(flat);
  comm.wait_all();
  int64_t offset = 0;
  for (const Tensor& p : params) {
    p.grad().copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

// Runs on_ready(i) inside backward, right after AccumulateGrad has written parameter i's .grad:
// where DDP's Reducer hooks in (Reducer::register_autograd_hooks). The graph holds accumulators
// only while it exists, so we keep them alive.
class GradReadyHooks {
 public:
  GradReadyHooks(const std::vector<Tensor>& params, std::function<void(size_t)> on_ready) {
    for (size_t i = 0; i < params.size(); ++i) {
      accumulators_.push_back(autograd::impl::grad_accumulator(params[i]));
      handles_.push_back(accumulators_.back()->add_post_hook([on_ready, i](const Tensor&) { on_ready(i); }));
    }
  }
  ~GradReadyHooks() {
    for (size_t i = 0; i < handles_.size(); ++i) accumulators_[i]->remove_post_hook(handles_[i]);
  }
 private:
  std::vector<std::shared_ptr<autograd::AccumulateGrad>> accumulators_;
  std::vector<uint64_t> handles_;
};

// Stage overlap: each gradient's allreduce starts the moment its hook fires, while backward goes
// on computing the gradients of earlier layers; we wait for all of them after backward.
std::unique_ptr<GradReadyHooks> overlap_per_parameter(Comm& comm, const std::vector<Tensor>& params) {
  return std::make_unique<GradReadyHooks>(params, [&comm, &params](size_t i) { comm.launch(params[i].grad()); });
}

// Stage buckets: gradients are copied into flat buckets, filled in reverse parameter order (about
// the order backward produces them); a bucket's allreduce starts when its last gradient arrives.
// Few messages (flat's win) that still overlap backward (overlap's). As in PyTorch, a bucket closes
// once it holds at least its cap; the first to fill has a smaller cap, so that communication starts
// early in backward, as in PyTorch's buckets once the rebuild has ordered them by gradient arrival.
class Buckets {
 public:
  Buckets(Comm& comm, const std::vector<Tensor>& params, int64_t first_bucket_bytes, int64_t bucket_bytes)
      : comm_(comm), params_(params), where_(params.size()) {
    int64_t bytes = 0;
    for (size_t i = params.size(); i-- > 0;) {
      const int64_t cap = buckets_.size() == 1 ? first_bucket_bytes : bucket_bytes;
      if (buckets_.empty() || bytes >= cap) buckets_.emplace_back(), bytes = 0;
      Bucket& b = buckets_.back();
      where_[i] = {buckets_.size() - 1, b.numel};
      b.params.push_back(i);
      b.numel += params[i].numel();
      bytes += static_cast<int64_t>(params[i].nbytes());
    }
    for (Bucket& b : buckets_) b.flat = zeros({b.numel}), b.pending = b.params.size();
    // The hooks call the stage's on_grad_ready: the later stages change what a gradient sets off.
    hooks_ = std::make_unique<GradReadyHooks>(params, [this](size_t i) { on_grad_ready(i); });
  }
  virtual ~Buckets() = default;
  size_t size() const { return buckets_.size(); }
  // After every bucket's allreduce completed: the averages back into .grad, for the parameters
  // `written` accepts (all by default); a .grad that does not exist yet is made.
  void copy_back(const std::function<bool(size_t)>& written = nullptr) {
    for (Bucket& b : buckets_) {
      for (size_t i : b.params) {
        if (written && !written(i)) continue;
        Tensor& grad = params_[i].mutable_grad();
        if (grad.defined()) {
          grad.copy_(view_of(i));
        } else {
          grad = view_of(i).clone();
        }
      }
      b.pending = b.params.size();
    }
  }

 protected:
  struct Bucket {
    std::vector<size_t> params;
    int64_t numel = 0;
    Tensor flat;
    size_t pending = 0;
  };
  Tensor view_of(size_t i) const {  // parameter i's place in its bucket
    const Tensor& p = params_[i];
    return buckets_[where_[i].first].flat.narrow(0, where_[i].second, p.numel()).view(p.sizes());
  }
  // Every rank's engine runs backward in the same order, so every rank launches the buckets in
  // the same order and the allreduces pair up. (PyTorch's Reducer also insists on index order.)
  virtual void on_grad_ready(size_t i) {
    view_of(i).copy_(params_[i].grad());
    mark_ready(i);
  }
  // Parameter i's slot is filled: its bucket launches once it has no slot left to fill.
  void mark_ready(size_t i) {
    Bucket& b = buckets_[where_[i].first];
    if (--b.pending == 0) comm_.launch(b.flat);
  }
  Comm& comm_;
  const std::vector<Tensor>& params_;
  std::vector<std::pair<size_t, int64_t>> where_;  // parameter -> (bucket, offset in its flat buffer)
  std::vector<Bucket> buckets_;
  std::unique_ptr<GradReadyHooks> hooks_;
};

// Stage broadcast: each rank initialises its own model, as separate processes do (its own seed),
// so before training every rank takes rank 0's parameters: DDP's constructor broadcast
// (docs/design.md step 3). Without it the replicas start apart and the averaged gradients keep
// them apart.
void broadcast_parameters(distributed::ProcessGroup& pg, const std::vector<Tensor>& params) {
  for (const Tensor& p : params) {
    std::vector<Tensor> t{p};  // written in place
    pg.broadcast(t, {/*root_rank=*/0})->wait();
  }
}

// Stage callback: the buckets wait for themselves. The first gradient of an iteration queues a
// callback on the autograd engine, which runs once backward has finished every node: it waits
// for the buckets' allreduces and copies the averages into .grad. loss.backward() then returns
// with the averaged gradients and the training loop is a one-process loop again (DDP's steps 11
// and 12).
class FinalizingBuckets : public Buckets {
 public:
  using Buckets::Buckets;

 protected:
  void on_grad_ready(size_t i) override {
    if (!queued_) {
      queued_ = true;
      autograd::Engine::get_default_engine().queue_callback([this] {
        finalize();
        queued_ = false;
      });
    }
    Buckets::on_grad_ready(i);
  }
  virtual void finalize() {
    comm_.wait_all();
    copy_back();
  }

 private:
  bool queued_ = false;
};

// Stage unused: a parameter the forward did not use gets no gradient, so its hook never fires and
// its bucket would wait for it forever. prepare() searches the autograd graph from the output for
// the parameters it does not reach; the first hook marks them ready with zeros in their slots;
// after the buckets, one more allreduce says which parameters some rank used, and finalize leaves
// the .grad of those no rank used as it was (DDP's steps 7, 8, 11 and 12 with
// find_unused_parameters).
class UnusedAwareBuckets : public FinalizingBuckets {
 public:
  using FinalizingBuckets::FinalizingBuckets;
  // After forward, before backward.
  void prepare(const Tensor& output) {
    const autograd::ReachableGraph graph = autograd::collect_reachable({output});
    unused_.clear();
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!graph.reaches(autograd::impl::grad_accumulator(params_[i]).get())) unused_.push_back(i);
    }
    marked_unused_ = false;
  }

 protected:
  void on_grad_ready(size_t i) override {
    if (!marked_unused_) {
      marked_unused_ = true;
      for (size_t u : unused_) view_of(u).zero_(), mark_ready(u);
    }
    FinalizingBuckets::on_grad_ready(i);
  }
  void finalize() override {
    comm_.wait_all();
    Tensor used = ones({static_cast<int64_t>(params_.size())});
    for (size_t u : unused_) used.narrow(0, static_cast<int64_t>(u), 1).zero_();
    comm_.launch(used);  // the average is 0 exactly where no rank used the parameter
    comm_.wait_all();
    const float* used_anywhere = used.data_ptr<float>();
    copy_back([used_anywhere](size_t i) { return used_anywhere[i] != 0; });
  }

 private:
  std::vector<size_t> unused_;
  bool marked_unused_ = false;
};

// The model of stage unused: the stages' model and, beside it, a head on the flattened input that
// only the last rank's forward uses (a branch used on one rank only).
struct WithAuxHead : nn::Module {
  std::shared_ptr<nn::Module> body;
  std::shared_ptr<nn::Linear> aux;
  bool use_aux = false;
  WithAuxHead(std::shared_ptr<nn::Module> model, uint64_t seed) : nn::Module("WithAuxHead") {
    Generator gen(seed);
    body = register_module("body", std::move(model));
    aux = register_module("aux", std::make_shared<nn::Linear>(28 * 28, 10, true, &gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = body->forward(x);
    return use_aux ? add(out, aux->forward(x.reshape({x.size(0), 28 * 28}))) : out;
  }
};

// The auxiliary head's seed, after the model's (stage unused).
constexpr uint64_t kAuxSeed = 7919;

std::shared_ptr<nn::Module> make_model(const std::string& name, uint64_t seed) {
  Generator gen(seed);
  if (name == "resnet20") {
    auto net = std::make_shared<nn::ResNet>(nn::ResNetOptions{20, 16, 1, 10}, &gen);
    // BatchNorm in train mode normalises with the statistics of the rows it sees, so a rank's
    // gradient would depend on how the batch is split (SyncBatchNorm's problem). Eval mode uses
    // the running statistics: every row's gradient is its own and the comparison stays exact.
    net->eval();
    return net;
  }
  std::vector<int64_t> sizes(32, 256);  // 32 Linear layers, 784 -> 256 -> ... -> 256 -> 10
  sizes.front() = 28 * 28;
  sizes.push_back(10);
  return nn::make_mlp(sizes, &gen);
}

// The global batch of a step: the same on every rank (and for the single-process reference).
std::pair<Tensor, Tensor> global_batch(const std::string& model, int64_t batch, uint64_t seed, int64_t step) {
  Generator gen(seed + 1000003 * static_cast<uint64_t>(step + 1));
  Tensor x = model == "mlp" ? randn({batch, 28 * 28}, &gen) : randn({batch, 1, 28, 28}, &gen);
  return {x, randint(0, 10, {batch}, &gen)};
}

}  // namespace

int example_main(int argc, char** argv) {
  std::string stage = "naive", model_name = "mlp";
  int64_t steps = 3, warmup = 1, batch = 24, threads = 1;
  uint64_t seed = 0;
  double bucket_mb = 25, first_bucket_mb = 1;
  const double lr = 0.05;
  flags::CommandLine cli("DDP built in stages from a ProcessGroup and autograd hooks "
                         "(docs/ddp-from-scratch.md). Run under mpirun.", "ddp_from_scratch");
  cli.add_option("--stage", stage, "how gradients are averaged")
      ->check(flags::one_of({"naive", "flat", "overlap", "buckets", "broadcast", "callback", "unused", "ddp"}));
  cli.add_option("--model", model_name, "mlp: 32 Linear layers of width 256; resnet20: ResNet-20 on 1x28x28")
      ->check(flags::one_of({"mlp", "resnet20"}));
  cli.add_option("--steps", steps, "training steps, warmup included")->check(flags::positive_integer());
  cli.add_option("--warmup", warmup, "first steps left out of the timings")->check(flags::non_negative_integer());
  flags::add_batch(cli, &batch, "global batch, split evenly over the ranks");
  cli.add_option("--bucket_mb", bucket_mb, "bucket cap for --stage=buckets and ddp (MiB)")
      ->check(flags::number_in(1e-6, 1e6, "a size in MiB"));
  cli.add_option("--first_bucket_mb", first_bucket_mb, "the first bucket's cap (MiB)")
      ->check(flags::number_in(1e-6, 1e6, "a size in MiB"));
  flags::add_seed(cli, &seed);
  flags::add_threads(cli, &threads);
  const int launcher_rank = flags::launcher_rank();
  try {
    if (cli.parse(argc, argv, launcher_rank == 0) == flags::Parsed::kHelp) return 0;
    EMBER_CHECK(warmup < steps, "--warmup: ", warmup, " leaves no timed step of --steps=", steps, " (see --help)");
  } catch (const std::exception& e) {
    if (launcher_rank == 0) std::fprintf(stderr, "ddp_from_scratch: %s\n", e.what());
    return 1;
  }
  set_num_threads(static_cast<int>(threads));
  auto pg = distributed::init_process_group("mpi");
  const int rank = pg->rank(), world = pg->size();
  if (batch % world != 0) {
    if (rank == 0) std::fprintf(stderr, "ddp_from_scratch: --batch: %lld rows do not split evenly over %d ranks\n",
                                (long long)batch, world);
    distributed::destroy_process_group();
    return 1;
  }
  const int64_t rows = batch / world;

  // From stage broadcast on, each rank initialises its model from its own seed (rank 0's is the
  // reference's); the stage unused adds a head that only the last rank uses.
  const bool own_seed = stage == "broadcast" || stage == "callback" || stage == "unused" || stage == "ddp";
  const uint64_t model_seed = own_seed ? seed + static_cast<uint64_t>(rank) : seed;
  std::shared_ptr<nn::Module> model = make_model(model_name, model_seed);
  if (stage == "unused") {
    auto with_aux = std::make_shared<WithAuxHead>(model, model_seed + kAuxSeed);
    with_aux->use_aux = rank == world - 1;
    model = with_aux;
  }
  const std::vector<Tensor> params = model->parameters();
  Comm comm(pg);
  std::unique_ptr<GradReadyHooks> overlap;
  std::unique_ptr<Buckets> buckets;
  UnusedAwareBuckets* unused = nullptr;  // buckets, in stage unused
  std::shared_ptr<distributed::DistributedDataParallel> ddp;
  const auto mib = [](double mb) { return static_cast<int64_t>(mb * 1024 * 1024); };
  const int64_t first_cap = mib(first_bucket_mb), cap = mib(bucket_mb);
  if (stage == "broadcast" || stage == "callback" || stage == "unused") broadcast_parameters(*pg, params);
  if (stage == "overlap") overlap = overlap_per_parameter(comm, params);
  if (stage == "buckets" || stage == "broadcast") buckets = std::make_unique<Buckets>(comm, params, first_cap, cap);
  if (stage == "callback") buckets = std::make_unique<FinalizingBuckets>(comm, params, first_cap, cap);
  if (stage == "unused") {
    auto u = std::make_unique<UnusedAwareBuckets>(comm, params, first_cap, cap);
    unused = u.get();
    buckets = std::move(u);
  }
  if (stage == "ddp") {
    distributed::DDPOptions options;
    options.bucket_cap_mb = bucket_mb;
    options.first_bucket_mb = first_bucket_mb;
    ddp = std::make_shared<distributed::DistributedDataParallel>(model, options);
  }
  nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : *model;
  optim::SGD opt(params, optim::SGDOptions(lr));

  double step_ms = 0, comm_wall_ms = 0, exposed_ms = 0, allreduces = 0;
  for (int64_t step = 0; step < steps; ++step) {
    auto [x, y] = global_batch(model_name, batch, seed, step);
    comm.clear();
    const double start = now_ms();
    opt.zero_grad();
    Tensor out = net.forward(x.narrow(0, rank * rows, rows));
    if (unused) unused->prepare(out);
    nn::functional::cross_entropy(out, y.narrow(0, rank * rows, rows)).backward();
    if (stage == "naive") allreduce_naive(comm, params);
    if (stage == "flat") allreduce_flat(comm, params);
    if (stage == "overlap") comm.wait_all();
    if (stage == "buckets" || stage == "broadcast") comm.wait_all(), buckets->copy_back();
    // callback, unused: backward returned with the averaged gradients.
    opt.step();
    const double end = now_ms();
    if (step < warmup) continue;
    // ms_per_step: the step's wall time, zero_grad to the optimizer step.
    // comm_wall_ms: the union of [launch, completion] over the step's allreduces.
    // exposed_comm_ms: the part of that union after the step began waiting for it (at backward's
    // end), what overlap did not hide.
    // allreduces_per_step: the collectives the step launched.
    step_ms += end - start;
    if (ddp) {
      // DDP's Reducer times itself the same way, from its buckets' spans (logging.h).
      const distributed::DDPLoggingData d = ddp->get_ddp_logging_data();
      comm_wall_ms += d.last.comm_wall_ms;
      exposed_ms += d.last.exposed_comm_ms;
      allreduces += static_cast<double>(d.num_buckets);
    } else {
      comm_wall_ms += comm.wall_ms();
      exposed_ms += comm.wall_ms(comm.wait_began());
      allreduces += static_cast<double>(comm.launched());
    }
  }

  if (rank == 0) {
    // The single-process reference: the same model and batches, whole batches, plain SGD.
    std::shared_ptr<nn::Module> reference = make_model(model_name, seed);
    std::shared_ptr<WithAuxHead> reference_with_aux;
    if (stage == "unused") reference = reference_with_aux = std::make_shared<WithAuxHead>(reference, seed + kAuxSeed);
    optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(lr));
    for (int64_t step = 0; step < steps; ++step) {
      auto [x, y] = global_batch(model_name, batch, seed, step);
      ref_opt.zero_grad();
      if (reference_with_aux) {
        // Each rank's rows through the model as that rank runs it (the head on the last rank's).
        mean_of_shard_losses(*reference, x, y, world, rows,
                             [&](int r) { reference_with_aux->use_aux = r == world - 1; })
            .backward();
      } else {
        nn::functional::cross_entropy(reference->forward(x), y).backward();
      }
      ref_opt.step();
    }
    double max_diff = 0;
    const std::vector<Tensor> ref_params = reference->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      max_diff = std::max(max_diff, max(abs(sub(params[i], ref_params[i]))).item<double>());
    }
    const double timed = static_cast<double>(steps - warmup);
    std::printf("%s, %d ranks, global batch %lld, %zu parameters", model_name.c_str(), world, (long long)batch,
                params.size());
    if (buckets) std::printf(", %zu buckets (%g MiB first, then %g MiB)", buckets->size(), first_bucket_mb, bucket_mb);
    std::printf("\n");
    std::printf("RESULT stage=%s max_abs_diff_vs_single=%.3g ms_per_step=%.3f comm_wall_ms=%.3f "
                "exposed_comm_ms=%.3f allreduces_per_step=%g\n",
                stage.c_str(), max_diff, step_ms / timed, comm_wall_ms / timed, exposed_ms / timed,
                allreduces / timed);
  }
  buckets.reset(), overlap.reset(), ddp.reset();  // their hooks and Reducer go before the group
  distributed::destroy_process_group();
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
