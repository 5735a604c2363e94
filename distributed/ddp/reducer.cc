// docs/design.md step 5: building the Reducer: one flat buffer per bucket with a view per parameter,
// a hook on every parameter's AccumulateGrad; and what the Reducer reports (logging_data).
#include "distributed/ddp/reducer.h"

#include "autograd/variable.h"
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp_reports/bucket_plan.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> param_names,
                 std::vector<std::vector<size_t>> bucket_indices, ProcessGroupPtr process_group,
                 std::vector<bool> expect_sparse_gradient, ReducerOptions options)
    : params_(std::move(params)),
      param_names_(std::move(param_names)),
      expect_sparse_gradient_(std::move(expect_sparse_gradient)),
      process_group_(std::move(process_group)),
      options_(options),
      comm_hook_(std::make_unique<AllReduceBySumCommHook>(process_group_)),
      statistics_(params_.size()) {
  EMBER_CHECK(!params_.empty(), "Reducer: no parameters to reduce");
  if (expect_sparse_gradient_.empty()) expect_sparse_gradient_.assign(params_.size(), false);
  ready_this_iteration_.assign(params_.size(), false);
  local_used_map_ = zeros({static_cast<int64_t>(params_.size())}, kInt32);
  num_grad_hooks_triggered_.assign(params_.size(), 0);
  initialize_buckets(std::move(bucket_indices));
  initial_bucket_indices_ = bucket_indices_;
  register_autograd_hooks();
}

Reducer::~Reducer() {
  for (size_t i = 0; i < grad_accumulators_.size(); ++i) {
    grad_accumulators_[i]->remove_post_hook(hook_handles_[i]);
  }
}

const std::string& Reducer::param_name(size_t index) const {
  static const std::string kUnnamed = "<unnamed>";
  return index < param_names_.size() && !param_names_[index].empty() ? param_names_[index] : kUnnamed;
}

std::string Reducer::param_names_of(const Bucket& bucket) const {
  std::string names;
  for (size_t index : bucket.variable_indices) names += (names.empty() ? "" : ", ") + param_name(index);
  return names;
}

// Step 5: one bucket per list of parameter indices, in launch order. Every parameter is in exactly
// one bucket (check_bucket_layout, reducer_rebuild.cc).
void Reducer::initialize_buckets(std::vector<std::vector<size_t>> bucket_indices) {
  NoGradGuard no_grad;
  DDP_INTERNAL_ASSERT(!expect_autograd_hooks_, "initialize_buckets must not run during a backward");
  check_bucket_layout(bucket_indices);
  buckets_.clear();
  variable_locators_.assign(params_.size(), VariableLocator{});
  for (size_t b = 0; b < bucket_indices.size(); ++b) buckets_.push_back(make_bucket(b, bucket_indices[b]));
  for (const Bucket& bucket : buckets_) {
    if (!bucket_stream_ && bucket.gradients.defined() && bucket.gradients.is_cuda()) {
      bucket_stream_ = std::make_unique<BucketStream>(bucket.gradients.device());
    }
  }
  bucket_indices_ = std::move(bucket_indices);
  statistics_.reset_buckets(buckets_.size());
}

// A parameter that expects a sparse gradient has a bucket of its own (PyTorch refuses it in a
// bucket of several); a dense bucket's parameters share one dtype and device.
Reducer::Bucket Reducer::make_bucket(size_t bucket_index, const std::vector<size_t>& indices) {
  Bucket bucket;
  bucket.expect_sparse_gradient = indices.size() == 1 && expect_sparse_gradient_[indices[0]];
  const Tensor& first = params_[indices[0]];
  size_t offset = 0;
  for (size_t j = 0; j < indices.size(); ++j) {
    const size_t i = indices[j];
    const Tensor& p = params_[i];
    DDP_CHECK(indices.size() == 1 || !expect_sparse_gradient_[i], "bucket ", bucket_index, " holds parameter '",
              param_name(i), "', which expects a sparse gradient, with ", indices.size() - 1,
              " others: a parameter with sparse gradients needs a bucket of its own");
    DDP_CHECK(p.dtype() == first.dtype() && p.device() == first.device(), "bucket ", bucket_index, " mixes ",
              first.describe(), " and ", p.describe(), " (parameter '", param_name(i), "')");
    bucket.variables.push_back(p);
    bucket.variable_indices.push_back(i);
    bucket.offsets.push_back(offset);
    bucket.lengths.push_back(static_cast<size_t>(p.numel()));
    bucket.sizes.push_back(p.sizes());
    variable_locators_[i] = VariableLocator{bucket_index, j};
    offset += static_cast<size_t>(p.numel());
  }
  if (!bucket.expect_sparse_gradient) {
    bucket.gradients = zeros({static_cast<int64_t>(offset)}, TensorOptions(first.dtype(), first.device()));
    initialize_bucket_views(bucket);
  }
  bucket.pending = bucket.variables.size();
  return bucket;
}

// A view of the flat buffer per parameter; with gradient_as_bucket_view, existing .grad tensors are
// moved into (and replaced by) their views.
void Reducer::initialize_bucket_views(Bucket& bucket) {
  for (size_t j = 0; j < bucket.variables.size(); ++j) {
    Tensor view = bucket.gradients.narrow(0, static_cast<int64_t>(bucket.offsets[j]),
                                          static_cast<int64_t>(bucket.lengths[j]))
                      .view(bucket.sizes[j]);
    bucket.bucket_views_in.push_back(view);
    bucket.bucket_views_out.push_back(view);
    if (!options_.gradient_as_bucket_view) continue;
    Tensor& grad = params_[bucket.variable_indices[j]].mutable_grad();
    if (grad.defined() && grad.data_ptr() != view.data_ptr()) {
      copy_(view, grad);
      grad = view;
    }
  }
}

// Step 5: a post-accumulate hook on every parameter's AccumulateGrad (kept alive here, as the
// graph only holds accumulators while a graph exists).
void Reducer::register_autograd_hooks() {
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = autograd::impl::grad_accumulator(params_[i]);
    hook_handles_.push_back(acc->add_post_hook([this, i](const Tensor&) { autograd_hook(i); }));
    grad_accumulators_.push_back(std::move(acc));
  }
}

void Reducer::register_comm_hook(std::unique_ptr<CommHookInterface> hook) {
  EMBER_CHECK(hook != nullptr, "register_comm_hook: null hook");
  EMBER_CHECK(!user_comm_hook_, "register_comm_hook: a communication hook ('", comm_hook_->name(),
              "') is already registered; register_comm_hook can only be called once");
  EMBER_CHECK(num_iterations_ == 0 && !expect_autograd_hooks_,
              "register_comm_hook: must be called before the first forward/backward of the DDP model");
  comm_hook_ = std::move(hook);
  user_comm_hook_ = true;
}

// Bytes per bucket of a layout (parameter indices per bucket).
std::vector<int64_t> Reducer::bucket_sizes_in_bytes(const std::vector<std::vector<size_t>>& indices) const {
  std::vector<int64_t> sizes;
  for (const auto& bucket : indices) {
    int64_t bytes = 0;
    for (size_t i : bucket) bytes += static_cast<int64_t>(params_[i].nbytes());
    sizes.push_back(bytes);
  }
  return sizes;
}

IterationTimeline Reducer::last_iteration_timeline() const {
  std::vector<int64_t> param_bytes;
  for (const Tensor& p : params_) param_bytes.push_back(static_cast<int64_t>(p.nbytes()));
  return statistics_.timeline(std::move(param_bytes), bucket_sizes_in_bytes(bucket_indices_));
}

void Reducer::describe_bucket_memory(BucketPlan& plan) const {
  plan.dtypes.clear();
  plan.slots.clear();
  for (const Bucket& bucket : buckets_) {
    plan.dtypes.push_back(bucket.variables.empty() ? "" : dtype_name(bucket.variables[0].dtype()));
    std::vector<BucketSlot> slots;
    for (size_t j = 0; !bucket.expect_sparse_gradient && j < bucket.offsets.size(); ++j) {
      slots.push_back({static_cast<int64_t>(bucket.offsets[j]), static_cast<int64_t>(bucket.lengths[j]),
                       bucket.sizes[j]});
    }
    plan.slots.push_back(std::move(slots));
  }
}

DDPLoggingData Reducer::logging_data() const {
  DDPLoggingData d;
  d.rank = process_group_->rank();
  d.world_size = process_group_->size();
  d.backend = process_group_->backend_name();
  d.comm_hook = comm_hook_->name();
  d.bucket_cap_bytes = static_cast<int64_t>(options_.bucket_bytes_cap);
  d.first_bucket_bytes = static_cast<int64_t>(options_.first_bucket_bytes);
  d.find_unused_parameters = options_.find_unused_parameters;
  d.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  d.static_graph = options_.static_graph;
  d.num_parameters = static_cast<int64_t>(params_.size());
  d.num_buckets = static_cast<int64_t>(buckets_.size());
  d.num_buckets_reduced = statistics_.num_buckets_reduced();
  d.runtime = statistics_.runtime();
  d.bucket_sizes = bucket_sizes_in_bytes(bucket_indices_);
  d.bucket_indices = bucket_indices_;
  d.initial_bucket_sizes = bucket_sizes_in_bytes(initial_bucket_indices_);
  d.initial_bucket_indices = initial_bucket_indices_;
  d.has_rebuilt_buckets = has_rebuilt_bucket_;
  d.num_iterations = num_iterations_;
  d.unused_parameter_count = static_cast<int64_t>(unused_parameters_.size());
  d.unused_parameter_indices = unused_parameters_;
  for (size_t i : unused_parameters_) d.unused_parameter_names.push_back(param_name(i));
  d.last = statistics_.last();
  return d;
}

}  // namespace ember::distributed
