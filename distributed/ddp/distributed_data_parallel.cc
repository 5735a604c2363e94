// DESIGN.md steps 1-4 (construction) and 6-7 (forward).
#include "distributed/ddp/distributed_data_parallel.h"

#include <algorithm>
#include <cstdlib>

#include "distributed/collective_helpers.h"
#include "distributed/trace.h"
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
  verify_params_across_processes(*process_group_, params_, param_names_);
  // Step 3: every rank starts from rank 0's parameters and buffers.
  if (options_.init_sync) sync_module_states();
  // Step 4: buckets by size in parameter order, then reversed: gradients arrive roughly in the
  // reverse of the order parameters were used in forward.
  const size_t cap = static_cast<size_t>(options_.bucket_cap_mb * 1024 * 1024);
  const size_t first = static_cast<size_t>(options_.first_bucket_mb * 1024 * 1024);
  EMBER_CHECK(cap > 0 && first > 0, "DistributedDataParallel: bucket_cap_mb (", options_.bucket_cap_mb,
              ") and first_bucket_mb (", options_.first_bucket_mb, ") must be positive");
  BucketAssignment a = compute_bucket_assignment_with_limits(params_, {first, cap},
                                                             expect_sparse_gradient_);
  std::reverse(a.bucket_indices.begin(), a.bucket_indices.end());
  std::reverse(a.per_bucket_size_limits.begin(), a.per_bucket_size_limits.end());
  // Step 5.
  ReducerOptions ro{options_.find_unused_parameters, options_.gradient_as_bucket_view,
                    options_.static_graph, first, cap};
  reducer_ = std::make_unique<Reducer>(params_, param_names_, std::move(a.bucket_indices),
                                       std::move(a.per_bucket_size_limits), process_group_,
                                       expect_sparse_gradient_, ro);
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

void DistributedDataParallel::sync_module_states() {
  NoGradGuard no_grad;
  std::vector<Tensor> tensors = params_;
  for (const Tensor& b : module_->buffers()) tensors.push_back(b);
  broadcast_coalesced(*process_group_, tensors, kDefaultBroadcastBucketBytes, 0);
}

// Step 6: rank 0's buffers (e.g. BatchNorm running statistics) overwrite everyone's.
void DistributedDataParallel::sync_buffers() {
  std::vector<Tensor> buffers = module_->buffers();
  if (buffers.empty()) return;
  NoGradGuard no_grad;
  broadcast_coalesced(*process_group_, buffers, kDefaultBroadcastBucketBytes, 0);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  const double start = Trace::now_us();
  TraceScope scope("DDP forward", "ddp");
  const bool sync = GradMode::is_enabled() && require_backward_grad_sync_;
  if (sync && reducer_->rebuild_buckets() && Trace::get().enabled()) {
    Trace::get().instant("buckets rebuilt", "ddp");
  }
  if (options_.broadcast_buffers) sync_buffers();
  Tensor output = module_->forward(input);
  if (sync) {
    const bool traverse = options_.find_unused_parameters ||
                          (options_.static_graph && reducer_->num_iterations() == 0);
    reducer_->prepare_for_backward(traverse ? std::vector<Tensor>{output} : std::vector<Tensor>{});
  }
  last_forward_ms_ = (Trace::now_us() - start) / 1000.0;
  return output;
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

DDPLoggingData DistributedDataParallel::get_ddp_logging_data() const {
  DDPLoggingData d = reducer_->logging_data();
  d.broadcast_buffers = options_.broadcast_buffers;
  d.last.forward_ms = last_forward_ms_;
  return d;
}

}  // namespace ember::distributed
