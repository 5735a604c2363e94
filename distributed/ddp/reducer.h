// docs/design.md steps 5, 7-13: the Reducer, which turns per-parameter gradients into bucketed,
// overlapped allreduces. Construction builds one flat buffer per bucket with a view per parameter
// and hooks every parameter's AccumulateGrad. During backward autograd_hook -> mark_variable_ready
// -> mark_bucket_ready launch buckets strictly in order through the comm hook; the last launch
// queues finalize_backward on the autograd engine. See PyTorch's torch/csrc/distributed/c10d/reducer.cpp.
// One file per group of steps (docs/reducer-map.md): reducer.cc (5), reducer_forward.cc (7),
// reducer_readiness.cc (8-9), reducer_launch.cc (10-11), reducer_finalize.cc (12),
// reducer_rebuild.cc (13), reducer_join.cc (under Join); what the steps record for logging and the
// trace is reducer_statistics.h's.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "autograd/accumulate_grad.h"
#include "distributed/ddp/bucket_stream.h"
#include "distributed/ddp/bucketing.h"
#include "distributed/ddp_reports/logging.h"
#include "distributed/ddp_reports/reducer_statistics.h"
#include "distributed/hooks/comm_hook.h"
#include "distributed/process_group.h"

namespace ember::distributed {

struct BucketPlan;  // distributed/ddp_reports/bucket_plan.h

// The Reducer's part of DDPOptions: the mode flags, and in bytes the first-bucket size and bucket
// cap that the bucket rebuild uses.
struct ReducerOptions {
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  bool skip_all_reduce_unused_params = false;  // DDPOptions's
  // The limits the bucket rebuild (step 13) uses: [first_bucket_bytes, bucket_bytes_cap].
  size_t first_bucket_bytes = kDefaultFirstBucketBytes;
  size_t bucket_bytes_cap = 25 * 1024 * 1024;
};

// DDP's gradient synchroniser (PyTorch's c10d::Reducer), built by DistributedDataParallel (its
// reducer()): owns the buckets and hooks each parameter's AccumulateGrad. Misuse (a gradient ready
// twice in one backward, an unfinished reduction) throws ember::Error naming the parameters.
class Reducer {
 public:
  // `bucket_indices`: the assignment in launch order (already reversed by DDP).
  Reducer(std::vector<Tensor> params, std::vector<std::string> param_names,
          std::vector<std::vector<size_t>> bucket_indices, ProcessGroupPtr process_group,
          std::vector<bool> expect_sparse_gradient, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called by DDP's forward when this iteration will synchronise gradients: counts iterations
  // (static_graph's "first iteration" is the first such forward, as in PyTorch).
  void prepare_for_forward();
  // Step 7: called by DDP's forward after the module ran; with find_unused_parameters (and no
  // static_graph), walks the graph from `outputs` to find the parameters that will get no gradient.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  // Step 13: rebuilds buckets in the observed gradient order once, before the first forward after
  // the order was recorded. Returns true when it rebuilt. Fails if the last iteration that marked
  // gradients ready did not finish its reduction.
  bool rebuild_buckets();
  // Exact resume (examples/common/train_checkpoint.h): installs a layout an earlier run rebuilt
  // (launch order, as logging_data().bucket_indices) as if this run had rebuilt it, so state kept
  // per bucket -- PowerSGD's error feedback -- lines up with the same parameters. Before the first
  // forward; every rank must pass the same layout; no rebuild follows.
  void load_rebuilt_buckets(std::vector<std::vector<size_t>> bucket_indices);
  // static_graph, first iteration: the hooks only counted; reduce everything now, in one go
  // (queued on the engine by DDP's output sink, runs after the whole backward).
  void delay_all_reduce();
  // Called on the autograd thread after every finalize_backward, outside the Reducer's lock (so it
  // may read logging_data()): DDP's first-iteration report (EMBER_DISTRIBUTED_DEBUG=INFO).
  void set_iteration_observer(std::function<void()> observer) { iteration_observer_ = std::move(observer); }
  // Replaces the default allreduce (issue: comm hooks). Only before the first backward.
  void register_comm_hook(std::unique_ptr<CommHookInterface> hook);

  // Join (distributed/join.h, reducer_join.cc). DDP's forward hands over Join's async count of the
  // ranks still training; with divide_by_initial_world_size=false the default path divides by it
  // instead of the group size (Note [Who divides gradients by the world size]).
  void set_forward_pass_work_handle(WorkPtr work, bool use_static_world_size);
  // A joined rank's shadow of one backward: every bucket's comm hook on zeros, in launch order, and
  // (find_unused_parameters) the used-parameter map's allreduce; waits for all of them.
  void match_all_reduce_for_bwd_pass();
  // A joined rank that never saw a gradient order queues every parameter, so it rebuilds its
  // buckets together with the ranks still training (PyTorch's _push_all_rebuilt_params).
  void push_all_rebuilt_params();

  // What a collective timeout most likely means (a rank ran out of data) and what to do (Join).
  std::string uneven_inputs_hint() const;

  DDPLoggingData logging_data() const;
  // Fills `plan`'s dtypes and slots from the buckets as they are now (step 5's flat buffers and views).
  void describe_bucket_memory(BucketPlan& plan) const;
  // The last synchronising iteration's timings (logging_data().last without the copying).
  const IterationStats& last_iteration_stats() const { return statistics_.last(); }
  // The last synchronising iteration's gradient-ready and bucket times, built on demand from what
  // the iteration recorded: valid from its finalize_backward until the next forward (the iteration
  // observer's window), so nothing is copied in iterations nobody asks about.
  IterationTimeline last_iteration_timeline() const;
  // Whether the next forward will rebuild the buckets (step 13 has not happened yet).
  bool will_rebuild_buckets() const { return should_rebuild_buckets(); }
  bool static_graph_first_iteration() const { return options_.static_graph && num_iterations_ == 1; }
  bool dynamic_graph_find_unused() const {
    return !options_.static_graph && options_.find_unused_parameters;
  }

 private:
  struct Bucket {
    Tensor gradients;                     // flat buffer (dense buckets)
    std::vector<Tensor> bucket_views_in;  // where gradients are copied to
    std::vector<Tensor> bucket_views_out; // where reduced results are read from
    std::vector<Tensor> variables;
    std::vector<size_t> variable_indices;
    std::vector<size_t> offsets, lengths;
    std::vector<Shape> sizes;
    size_t pending = 0;
    bool expect_sparse_gradient = false;
    Tensor sparse_gradient;
    FuturePtr future_work;
  };
  struct VariableLocator {
    size_t bucket_index = 0;
    size_t intra_bucket_index = 0;
  };

  friend class ReducerTestPeer;  // tests/distributed/ddp/reducer_invariants_test.cc

  // Step 5 (reducer.cc).
  void initialize_buckets(std::vector<std::vector<size_t>> bucket_indices);
  Bucket make_bucket(size_t bucket_index, const std::vector<size_t>& indices);
  void initialize_bucket_views(Bucket& bucket);
  void register_autograd_hooks();
  // Step 7 (reducer_forward.cc).
  void search_unused_parameters(const std::vector<Tensor>& outputs);
  void warn_no_unused_parameters();
  // A trace instant naming the unused parameters the first hook marks ready (step 8).
  void trace_unused_marked_ready() const;
  // Steps 8-9 (reducer_readiness.cc).
  void autograd_hook(size_t index);
  void mark_variable_ready(size_t index);
  void mark_variable_ready_dense(size_t index);
  void check_dense_gradient(size_t index, const Tensor& grad, const Tensor& view);
  void mark_variable_ready_sparse(size_t index);
  static Tensor empty_sparse_gradient(const Tensor& param);
  [[noreturn]] void fail_marked_twice(size_t index);
  // Steps 10-11 (reducer_launch.cc).
  void mark_bucket_ready(size_t bucket_index);
  // Seed 000's should_skip_all_reduce_bucket: whether every parameter of the bucket is unused
  // (the unused set being the same on every rank, the allreduce would change nothing).
  bool should_skip_all_reduce_bucket(const Bucket& bucket) const;
  void skip_all_reduce_bucket(Bucket& bucket, size_t bucket_index);
  void all_reduce_bucket(Bucket& bucket, size_t bucket_index);
  GradBucket make_grad_bucket(const Bucket& bucket, size_t bucket_index, const Tensor& buffer) const;
  FuturePtr run_comm_hook(GradBucket& grad_bucket);
  // CUDA buckets: the bucket stream current for the scope, after the compute stream's work so far
  // (Note [Bucket copies on the communication stream]); nothing for CPU buckets.
  std::optional<CudaStreamGuard> on_bucket_stream();
  void all_reduce_local_used_map();
  void queue_finalize_backward();
  // The divisor of the default path in this iteration: the group size, or Join's count
  // (reducer_join.cc).
  double divide_factor();
  // Step 12 (reducer_finalize.cc).
  void finalize_backward();
  void notify_iteration_observer();
  std::exception_ptr wait_for_bucket_reductions(std::vector<Tensor>& results);
  std::exception_ptr wait_for_local_used_map();
  void write_back_bucket(Bucket& bucket, size_t bucket_index, const Tensor& result);
  void finalize_bucket_dense(Bucket& bucket, size_t bucket_index);
  bool is_globally_unused(size_t variable_index) const;
  void copy_bucket_to_grad(const Tensor& variable, Bucket& bucket, size_t intra_bucket_index,
                           bool global_unused);
  void reset_after_iteration();
  void delay_all_reduce_locked();
  // Step 13 (reducer_rebuild.cc).
  void ensure_prior_reduction_finished();
  void push_rebuilt_params(size_t index);
  bool should_rebuild_buckets() const {
    return (options_.static_graph || !options_.find_unused_parameters) && !has_rebuilt_bucket_;
  }
  std::vector<std::vector<size_t>> sync_bucket_indices(std::vector<std::vector<size_t>> indices);
  void check_bucket_layout(const std::vector<std::vector<size_t>>& bucket_indices) const;

  bool static_graph_after_first_iteration() const { return options_.static_graph && num_iterations_ > 1; }
  bool tracks_local_use() const { return dynamic_graph_find_unused() || static_graph_first_iteration(); }
  // By reference: autograd_hook passes it to the statistics on every gradient.
  const std::string& param_name(size_t index) const;
  std::string param_names_of(const Bucket& bucket) const;
  int ddp_rank() const { return process_group_->rank(); }  // for DDP_CHECK (ddp_check.h)
  std::vector<int64_t> bucket_sizes_in_bytes(const std::vector<std::vector<size_t>>& indices) const;

  std::vector<Tensor> params_;
  std::vector<std::string> param_names_;
  std::vector<bool> expect_sparse_gradient_;
  ProcessGroupPtr process_group_;
  ReducerOptions options_;
  std::unique_ptr<CommHookInterface> comm_hook_;
  bool user_comm_hook_ = false;

  std::vector<std::vector<size_t>> bucket_indices_;
  std::vector<Bucket> buckets_;
  std::vector<VariableLocator> variable_locators_;
  std::unique_ptr<BucketStream> bucket_stream_;  // set when the dense buckets are on a GPU
  std::vector<std::shared_ptr<autograd::AccumulateGrad>> grad_accumulators_;
  std::vector<uint64_t> hook_handles_;

  // Per-iteration state. Everything below is touched by the autograd thread only (hooks, DDP's
  // forward, the engine's final callback); the mutex guards against hooks fired from another
  // thread's backward, as PyTorch's does.
  std::mutex mutex_;
  size_t next_bucket_ = 0;
  bool expect_autograd_hooks_ = false;
  // Set when a variable is marked ready, cleared by finalize: a forward with no backward leaves
  // it false, so it is legal (PyTorch's require_finalize_).
  bool require_finalize_ = false;
  bool has_marked_unused_parameters_ = false;
  std::vector<bool> ready_this_iteration_;
  std::vector<size_t> unused_parameters_;
  // static_graph: how many times each parameter's hook fired in the first iteration, and the
  // countdown for the current one (a parameter is ready when its count reaches zero).
  std::vector<int> num_grad_hooks_triggered_;
  std::vector<int> num_grad_hooks_this_iteration_;
  Tensor local_used_map_;      // int32 [num params], 1 where this rank produced a gradient
  Tensor local_used_map_dev_;  // what goes over the wire
  WorkPtr local_used_work_;
  bool local_used_map_reduced_ = false;
  // 0 until divide_factor() resolved it for this iteration (PyTorch's kUnsetDivFactor).
  double div_factor_ = 0.0;
  WorkPtr forward_pass_work_;  // Join's count of the ranks still training (this iteration)
  bool use_static_world_size_ = true;

  // Bucket rebuild (step 13).
  std::vector<Tensor> rebuilt_params_;
  std::vector<int64_t> rebuilt_param_indices_;
  bool has_rebuilt_bucket_ = false;
  std::vector<std::vector<size_t>> initial_bucket_indices_;

  int64_t num_iterations_ = 0;  // synchronising forwards so far (prepare_for_forward)
  bool warned_no_unused_ = false;
  bool warned_strides_ = false;
  ReducerStatistics statistics_;
  std::function<void()> iteration_observer_;
};

}  // namespace ember::distributed
