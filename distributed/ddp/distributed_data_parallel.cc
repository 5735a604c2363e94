// docs/design.md steps 1-4 (construction) and 6-7 (forward).
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/distributed_data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "distributed/collective_helpers.h"
#include "distributed/ddp_reports/bucket_plan.h"
#include "distributed/ddp/ddp_sink.h"
#include "distributed/ddp_reports/first_iteration_report.h"
#include "distributed/ddp_reports/straggler.h"
#include "distributed/diagnostics/trace.h"
#include "nn/layers/simple.h"

namespace ember::distributed {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options)
    : nn::Module("DistributedDataParallel"), module_(std::move(module)), options_(std::move(options)) {
  EMBER_CHECK(module_ != nullptr, "DistributedDataParallel: module is null");
  process_group_ = options_.process_group ? options_.process_group : get_default_group();
  register_module("module", module_);
  const char* env_trace = std::getenv("EMBER_DDP_TRACE");
  const std::string trace_dir = !options_.trace_dir.empty() ? options_.trace_dir : (env_trace ? env_trace : "");
  if (!trace_dir.empty()) {
    Trace::get().enable(trace_dir + "/ember_trace_rank" + std::to_string(process_group_->rank()) + ".json",
                        process_group_->rank());
  }
  build_params_for_reducer();
  // Step 2: same parameter count, shapes and strides everywhere, or a clear error on every rank.
  {
    TraceLabel label("parameter shapes");  // what the collectives are for, in a trace
    verify_params_across_processes(*process_group_, params_, param_names_);
  }
  // Step 3: every rank starts from rank 0's parameters and buffers.
  if (options_.init_sync) sync_module_states();
  // Steps 4 and 5.
  build_reducer(compute_initial_bucket_indices());
  reducer_->set_iteration_observer([this] { on_iteration_finalized(); });
  // Every rank leaves construction's collectives together: a point to align ranks' traces by
  // when they run on different machines (Note [Trace clocks]). It carries the bucket plan.
  if (Trace::get().enabled()) Trace::get().instant("ddp constructed", "ddp", 0, current_bucket_plan_json());
}

// Step 4: buckets by size in parameter order, then reversed: gradients arrive roughly in the
// reverse of the order parameters were used in forward. Note [First-iteration buckets]: unless
// find_unused_parameters is on without static_graph, the first iteration uses one bucket per
// dtype, as PyTorch does (limit sys.maxsize): parameter order is not execution order, and a
// bucket launched early on one rank could pair with a different collective (another part of
// the backward, or a rank whose unused parameters made a bucket ready sooner) on another. The
// rebuild after the first iteration then uses [first_bucket_mb, bucket_cap_mb] in the order
// gradients were observed.
std::vector<std::vector<size_t>> DistributedDataParallel::compute_initial_bucket_indices() const {
  const bool one_bucket_first = options_.static_graph || !options_.find_unused_parameters;
  const std::vector<size_t> limits = one_bucket_first ? std::vector<size_t>{std::numeric_limits<size_t>::max()}
                                                      : std::vector<size_t>{first_bucket_bytes(), bucket_bytes_cap()};
  std::vector<std::vector<size_t>> indices = compute_bucket_assignment_by_size(params_, limits, expect_sparse_gradient_);
  std::reverse(indices.begin(), indices.end());
  return indices;
}

size_t DistributedDataParallel::bucket_bytes_cap() const {
  const double cap_mb = options_.effective_bucket_cap_mb();
  DDP_CHECK(cap_mb > 0 && static_cast<size_t>(cap_mb * 1024 * 1024) > 0, "bucket_cap_mb (", cap_mb,
            ") must be positive");
  return static_cast<size_t>(cap_mb * 1024 * 1024);
}

size_t DistributedDataParallel::first_bucket_bytes() const {
  const double first_mb = options_.effective_first_bucket_mb();
  DDP_CHECK(first_mb > 0 && static_cast<size_t>(first_mb * 1024 * 1024) > 0, "first_bucket_mb (", first_mb,
            ") must be positive");
  return static_cast<size_t>(first_mb * 1024 * 1024);
}

// Step 5: the Reducer gets DDPOptions' part that it reads (ReducerOptions) and the bucket limits
// in bytes.
void DistributedDataParallel::build_reducer(std::vector<std::vector<size_t>> bucket_indices) {
  ReducerOptions ro;
  ro.find_unused_parameters = options_.find_unused_parameters;
  ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  ro.static_graph = options_.static_graph;
  ro.skip_all_reduce_unused_params = options_.skip_all_reduce_unused_params;
  ro.first_bucket_bytes = first_bucket_bytes();
  ro.bucket_bytes_cap = bucket_bytes_cap();
  reducer_ = std::make_unique<Reducer>(params_, param_names_, std::move(bucket_indices), process_group_,
                                       expect_sparse_gradient_, ro);
}

std::string DistributedDataParallel::current_bucket_plan_json() const {
  const DDPLoggingData d = reducer_->logging_data();
  BucketPlan plan{d.bucket_indices, d.bucket_sizes};
  reducer_->describe_bucket_memory(plan);
  return bucket_plan_json(plan, param_names_);
}

// EMBER_DISTRIBUTED_DEBUG=INFO: once the buckets are final and an iteration ran with them, the
// first-iteration report (first_iteration_report.h); rank 0 prints it, the other ranks only the
// parameters that got no gradient there.
void DistributedDataParallel::on_iteration_finalized() {
  if (!first_iteration_report_.empty() || process_group_->debug_level() < DebugLevel::kInfo) return;
  IterationSnapshot now{get_ddp_logging_data(), reducer_->last_iteration_timeline()};
  if (!first_snapshot_) {
    first_snapshot_ = now;
    if (reducer_->will_rebuild_buckets()) return;
  }
  FirstIterationFacts facts{*first_snapshot_, now, param_names_, {}};
  std::map<std::string, std::string> module_types;
  for (auto& [path, m] : module_->named_modules()) module_types[path] = m->type_name();
  for (const std::string& name : param_names_) {
    const std::string path = name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.'));
    auto it = module_types.find(path);
    facts.param_modules.push_back((it != module_types.end() ? it->second : "?") + " " +
                                  (path.empty() ? "(the root module)" : path));
  }
  first_iteration_report_ = format_first_iteration_report(facts);
  first_snapshot_.reset();
  const int rank = process_group_->rank();
  const std::vector<size_t> unused = parameters_without_gradient(facts.first);
  if (rank == 0) {
    std::fputs(first_iteration_report_.c_str(), stderr);
  } else if (!unused.empty()) {
    std::string names;
    for (size_t i : unused) names += (names.empty() ? "" : ", ") + param_names_[i];
    std::fprintf(stderr, "[rank %d] DDP first-iteration report: %zu parameters got no gradient in iteration 1 "
                 "on this rank: %s\n", rank, unused.size(), names.c_str());
  }
  std::fflush(stderr);
}

DistributedDataParallel::~DistributedDataParallel() { Trace::get().flush(); }

// Step 1: parameters that require grad, minus ignored names; shared (tied) parameters once — the
// Module already de-duplicates them. Embedding(sparse=true) parameters expect sparse gradients.
void DistributedDataParallel::build_params_for_reducer() {
  std::set<const TensorImpl*> sparse;
  for (auto& [name, m] : module_->named_modules()) {
    auto* emb = dynamic_cast<nn::Embedding*>(m.get());
    if (emb && emb->sparse()) {
      for (auto& [pname, p] : emb->named_parameters(false)) sparse.insert(p.unsafe_impl());
    }
  }
  for (auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad() || options_.parameters_to_ignore.count(name)) continue;
    params_.push_back(p);
    param_names_.push_back(name);
    expect_sparse_gradient_.push_back(sparse.count(p.unsafe_impl()) > 0);
  }
  EMBER_CHECK(!params_.empty(), "DistributedDataParallel is not needed when a module doesn't have any ",
              "parameter that requires a gradient (rank ", process_group_->rank(), ")");
}

// Step 3 (and Join's final sync, from the last joiner): every parameter (trainable or frozen) and
// every buffer, except the ignored ones, as PyTorch's _sync_module_states: a frozen layer must not
// keep each rank's own initialisation.
void DistributedDataParallel::sync_module_states(int root) {
  NoGradGuard no_grad;
  std::vector<Tensor> tensors;
  for (auto& [name, p] : module_->named_parameters()) {
    if (!options_.parameters_to_ignore.count(name)) tensors.push_back(p);
  }
  for (const Tensor& b : buffers_to_sync()) tensors.push_back(b);
  TraceLabel label("parameters and buffers");
  broadcast_coalesced(*process_group_, tensors, kDefaultBroadcastBucketBytes, root);
}

// Looked up at every sync: a module may replace its buffers (PyTorch's _assign_modules_buffers).
std::vector<Tensor> DistributedDataParallel::buffers_to_sync() const {
  std::vector<Tensor> buffers;
  for (auto& [name, b] : module_->named_buffers()) {
    if (!options_.parameters_to_ignore.count(name)) buffers.push_back(b);
  }
  return buffers;
}

// Step 6: rank 0's buffers (e.g. BatchNorm running statistics) overwrite everyone's. Under Join
// rank 0 may have joined with stale buffers: the highest rank still training is the source.
void DistributedDataParallel::sync_buffers() {
  broadcast_buffers_from(join_config().enable ? find_common_rank(true) : 0);
}

void DistributedDataParallel::broadcast_buffers_from(int root) {
  std::vector<Tensor> buffers = buffers_to_sync();
  if (buffers.empty()) return;
  NoGradGuard no_grad;
  TraceLabel label("buffers");
  broadcast_coalesced(*process_group_, buffers, kDefaultBroadcastBucketBytes, root);
}

// PyTorch's will_sync_module_buffers (the joined rank asks too, so both sides agree).
bool DistributedDataParallel::will_sync_module_buffers() const {
  return require_forward_param_sync_ && options_.broadcast_buffers && !buffers_to_sync().empty();
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  return call([&] { return module_->forward(input); });
}

std::vector<Tensor> DistributedDataParallel::forward_many(const std::vector<Tensor>& inputs) {
  return call([&] { return module_->forward_many(inputs); });
}

// Step 6, PyTorch's _pre_forward.
void DistributedDataParallel::pre_forward() {
  forward_start_us_ = Trace::now_us();
  const bool grad_enabled = GradMode::is_enabled();
  if (grad_enabled && require_backward_grad_sync_) reducer_->prepare_for_forward();
  // Note [Join protocol], step 1 (a no-op without Join).
  notify_join_context();
  if (grad_enabled && require_backward_grad_sync_) {
    if (options_.straggler_check_every > 0 && !join_config().enable) check_for_stragglers();
    ++sync_forwards_;
  }
  // Step 13 happens here, before the forward's activations raise the memory peak.
  if (grad_enabled && reducer_->rebuild_buckets() && Trace::get().enabled()) {
    Trace::get().instant("buckets rebuilt", "ddp", 0, current_bucket_plan_json());
  }
  if (will_sync_module_buffers()) {
    try {
      sync_buffers();
    } catch (const std::exception& e) {
      DDP_THROW("broadcasting the buffers "
                "before forward failed: ", e.what(), ". ", reducer_->uneven_inputs_hint());
    }
  }
  if (join_config().enable) requires_sync_work_ = check_global_requires_backward_grad_sync(false);
}

// Note [Straggler check]: the previous iteration's times go into this check period's means; every
// straggler_check_every synchronising iterations the ranks compare them and probe their links.
void DistributedDataParallel::check_for_stragglers() {
  if (sync_forwards_ == 0) return;
  const IterationStats& last = reducer_->last_iteration_stats();
  period_.compute_ms += std::max(0.0, last_forward_ms_ + last.backward_ms - last.exposed_comm_ms);
  period_.comm_wait_ms += last.exposed_comm_ms;
  ++period_iterations_;
  if (sync_forwards_ % options_.straggler_check_every != 0) return;
  TraceScope scope("straggler check", "ddp");
  RankHealth mean = period_;
  mean.compute_ms /= period_iterations_;
  mean.comm_wait_ms /= period_iterations_;
  period_ = RankHealth{};
  period_iterations_ = 0;
  straggler_ = run_straggler_check(*process_group_, sync_forwards_, mean, options_.straggler_probe_bytes);
}

// Step 7, PyTorch's _post_forward: prepare the Reducer, and route the outputs through the sink
// (ddp_sink.h) when some parameters may get no gradient.
std::vector<Tensor> DistributedDataParallel::post_forward(std::vector<Tensor> outputs) {
  const bool sync = GradMode::is_enabled() && require_backward_grad_sync_;
  require_forward_param_sync_ = sync;
  const bool dynamic_find_unused = reducer_->dynamic_graph_find_unused();
  if (sync) {
    TraceScope scope("prepare_for_backward", "ddp");
    reducer_->prepare_for_backward(dynamic_find_unused ? outputs : std::vector<Tensor>{});
  }
  const bool static_first = sync && reducer_->static_graph_first_iteration();
  if (dynamic_find_unused || static_first) {
    outputs = pass_through_ddp_sink(outputs, *reducer_, /*delay_all_reduce=*/static_first);
  }
  last_forward_ms_ = (Trace::now_us() - forward_start_us_) / 1000.0;
  if (Trace::get().enabled()) Trace::get().span("DDP forward", "ddp", forward_start_us_, last_forward_ms_ * 1000.0);
  return outputs;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.require_backward_grad_sync_) {
  ddp_.require_backward_grad_sync_ = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.require_backward_grad_sync_ = previous_; }

void DistributedDataParallel::register_comm_hook(std::unique_ptr<CommHookInterface> hook) {
  reducer_->register_comm_hook(std::move(hook));
}

void DistributedDataParallel::register_builtin_comm_hook(BuiltinCommHookType type) {
  reducer_->register_comm_hook(make_builtin_comm_hook(type, process_group_));
}

std::vector<std::vector<size_t>> DistributedDataParallel::rebuilt_bucket_layout() const {
  DDPLoggingData d = reducer_->logging_data();
  return d.has_rebuilt_buckets ? d.bucket_indices : std::vector<std::vector<size_t>>{};
}

void DistributedDataParallel::load_bucket_layout(std::vector<std::vector<size_t>> bucket_indices) {
  reducer_->load_rebuilt_buckets(std::move(bucket_indices));
}

DDPLoggingData DistributedDataParallel::get_ddp_logging_data() const {
  DDPLoggingData d = reducer_->logging_data();
  d.broadcast_buffers = options_.broadcast_buffers;
  d.join_uneven_inputs = join_uneven_inputs_;
  d.last.forward_ms = last_forward_ms_;
  d.straggler = straggler_;
  return d;
}

}  // namespace ember::distributed
