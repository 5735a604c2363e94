// docs/design.md steps 1-4 and 6-7: DistributedDataParallel, a Module wrapping another. Construction
// collects and de-duplicates the parameters, verifies them across ranks, broadcasts rank 0's
// parameters and buffers, assigns buckets (reversed) and builds the Reducer. forward() broadcasts
// buffers, runs the module and prepares the Reducer for backward. Backward needs no call: the
// Reducer's autograd hooks do the rest.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "distributed/ddp_reports/first_iteration_report.h"
#include "distributed/ddp_reports/logging.h"
#include "distributed/ddp/reducer.h"
#include "distributed/hooks/default_hooks.h"
#include "distributed/join.h"
#include "distributed/process_group.h"
#include "nn/module.h"

namespace ember::distributed {

// DistributedDataParallel's arguments, named and defaulted as PyTorch's (bucket_cap_mb 25,
// broadcast_buffers, find_unused_parameters, ...); first_bucket_mb, trace_dir and the straggler
// check are ember extensions.
struct DDPOptions {
  ProcessGroupPtr process_group;       // default: the default group
  // Bucket caps in MiB (1 MiB = 1024 * 1024 bytes), as PyTorch's. Unset: 25 (its default).
  std::optional<double> bucket_cap_mb;
  // The first bucket's cap once buckets are rebuilt (Note [First-iteration buckets]). Unset, it
  // is what PyTorch uses: 1 MiB (_DEFAULT_FIRST_BUCKET_BYTES) when bucket_cap_mb is left unset,
  // bucket_cap_mb itself when it is set. PyTorch has no such option; tests and the bucket-size
  // experiments set it to see small first buckets on small models.
  std::optional<double> first_bucket_mb;
  double effective_bucket_cap_mb() const { return bucket_cap_mb.value_or(kDefaultBucketCapMb); }
  double effective_first_bucket_mb() const {
    return first_bucket_mb.value_or(bucket_cap_mb ? *bucket_cap_mb : kDefaultFirstBucketMb);
  }
  static constexpr double kDefaultBucketCapMb = 25;    // PyTorch's bucket_cap_mb default
  static constexpr double kDefaultFirstBucketMb = 1;   // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES
  bool broadcast_buffers = true;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  // PyTorch 2.x's skip_all_reduce_unused_params: a bucket whose parameters are all unused issues
  // no collective (Reducer::should_skip_all_reduce_bucket). Needs static_graph or
  // find_unused_parameters, and the same unused parameters on every rank in every iteration.
  bool skip_all_reduce_unused_params = false;
  // Names as in module.named_parameters() / named_buffers(): neither reduced nor broadcast, at
  // construction or in forward (PyTorch's _ddp_params_and_buffers_to_ignore).
  std::set<std::string> parameters_to_ignore;
  bool init_sync = true;
  std::string trace_dir;               // write a Chrome trace per rank here (or EMBER_DDP_TRACE)
  // ember extension: every N synchronising iterations, probe the links and compare the ranks'
  // compute times, naming a straggler in get_ddp_logging_data().straggler (Note [Straggler check],
  // straggler.h); 0: never. Not under Join.
  int64_t straggler_check_every = 0;
  size_t straggler_probe_bytes = 4 << 20;  // above tc's token-bucket burst, so a capped link shows
};

// A Joinable (distributed/join.h): under Join, a rank out of data shadows this DDP's collectives
// (ddp_join.cc, Note [Join protocol]).
class DistributedDataParallel : public nn::Module, public Joinable {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  // A module with several inputs or outputs (nn::Module::forward_many). With
  // find_unused_parameters the unused-parameter search starts from every output, and outputs the
  // loss does not use are fine.
  std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs) override;
  // Any forward: `run` calls the wrapped module however it likes and returns a Tensor, a
  // std::vector<Tensor>, a std::map<std::string, Tensor>, or a struct of named tensors with a
  // member `template <class F> void for_each_tensor(F f)` calling f(Tensor&) on each field.
  // DDP does around it what forward() does (buffers, rebuild, unused-parameter search).
  //   auto out = ddp.call([&] { return net->heads(x); });   // out.logits, out.aux
  template <typename Fn>
  auto call(Fn&& run);
  std::shared_ptr<nn::Module> module() const { return module_; }

  // Inside the guard's scope gradients accumulate locally without communication; the first
  // backward after it synchronises everything accumulated (PyTorch's no_sync()).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // Comm hooks (distributed/hooks/): replaces the default allreduce; once, before training.
  void register_comm_hook(std::unique_ptr<CommHookInterface> hook);
  template <typename State>
  void register_comm_hook(std::shared_ptr<State> state, typename CppCommHook<State>::Hook hook,
                          std::string name = "user hook") {
    register_comm_hook(std::make_unique<CppCommHook<State>>(std::move(state), std::move(hook), std::move(name)));
  }
  // PyTorch's _register_builtin_comm_hook: a built-in hook over this DDP's process group.
  void register_builtin_comm_hook(BuiltinCommHookType type);

  // Joinable (ddp_join.cc). Options read: divide_by_initial_world_size.
  std::unique_ptr<JoinHook> join_hook(const JoinOptions& options) override;
  ProcessGroupPtr join_process_group() const override { return process_group_; }
  // The rank whose parameters every rank took when the last Join finished (-1 before).
  int authoritative_rank() const { return authoritative_rank_; }

  DDPLoggingData get_ddp_logging_data() const;
  // Exact resume: the bucket layout after the rebuild (empty before it), and installing one from an
  // earlier run before the first forward (Reducer::load_rebuilt_buckets). ember extension.
  std::vector<std::vector<size_t>> rebuilt_bucket_layout() const;
  void load_bucket_layout(std::vector<std::vector<size_t>> bucket_indices);
  const std::vector<std::string>& parameter_names() const { return param_names_; }
  // EMBER_DISTRIBUTED_DEBUG=INFO (or the process group's debug level): the first-iteration report
  // (first_iteration_report.h), set once an iteration ran with the final buckets; "" before, or
  // below INFO. Rank 0 also prints it on stderr.
  const std::string& first_iteration_report() const { return first_iteration_report_; }
  // The last straggler check (iteration -1 before the first); get_ddp_logging_data() has it too.
  const StragglerReport& straggler_report() const { return straggler_; }
  ProcessGroup& process_group() const { return *process_group_; }
  Reducer& reducer() { return *reducer_; }

 private:
  // Step 1.
  void build_params_for_reducer();
  int ddp_rank() const { return process_group_->rank(); }  // for DDP_CHECK (ddp_check.h)
  // Step 3.
  void sync_module_states(int root = 0);
  // Step 4: the first iteration's buckets, in launch order (Note [First-iteration buckets]).
  std::vector<std::vector<size_t>> compute_initial_bucket_indices() const;
  size_t bucket_bytes_cap() const;    // bucket_cap_mb in bytes
  size_t first_bucket_bytes() const;  // first_bucket_mb in bytes
  // Step 5.
  void build_reducer(std::vector<std::vector<size_t>> bucket_indices);
  // Step 6: from rank 0, or under Join from the highest rank still training (ddp_join.cc).
  void sync_buffers();
  void broadcast_buffers_from(int root);
  bool will_sync_module_buffers() const;
  std::vector<Tensor> buffers_to_sync() const;
  // Around the wrapped module's forward (PyTorch's _pre_forward / _post_forward).
  void pre_forward();
  std::vector<Tensor> post_forward(std::vector<Tensor> outputs);
  void check_for_stragglers();
  void on_iteration_finalized();
  std::string current_bucket_plan_json() const;
  // Join (ddp_join.cc).
  friend class DDPJoinHook;
  void notify_join_context();
  // The highest rank for which `condition` holds (PyTorch's _find_common_rank).
  int find_common_rank(bool condition);
  // Async allreduce telling joined ranks whether this iteration's backward synchronises.
  WorkPtr check_global_requires_backward_grad_sync(bool is_joined_rank);
  // Every rank takes the last joiner's parameters and buffers (PyTorch's _sync_final_model).
  void sync_final_model(bool is_last_joiner);

  std::shared_ptr<nn::Module> module_;
  DDPOptions options_;
  ProcessGroupPtr process_group_;
  std::vector<Tensor> params_;
  std::vector<std::string> param_names_;
  std::vector<bool> expect_sparse_gradient_;
  std::unique_ptr<Reducer> reducer_;
  bool require_backward_grad_sync_ = true;
  // Whether the next forward broadcasts buffers: set by each forward to "grad enabled and
  // synchronising" (PyTorch's require_forward_param_sync), so a validation pass under no_grad or a
  // no_sync micro-batch does not make the forward after it broadcast.
  bool require_forward_param_sync_ = true;
  bool divide_by_initial_world_size_ = true;
  bool join_uneven_inputs_ = false;  // a Join built a hook for this DDP
  int authoritative_rank_ = -1;
  WorkPtr requires_sync_work_;  // kept until the next forward; nobody waits on it here
  double forward_start_us_ = 0;
  double last_forward_ms_ = 0;
  int64_t sync_forwards_ = 0;  // synchronising forwards so far (the straggler check's clock)
  RankHealth period_;           // sums of this rank's times since the last straggler check
  int64_t period_iterations_ = 0;
  StragglerReport straggler_;
  std::optional<IterationSnapshot> first_snapshot_;  // iteration 1, until the report is made
  std::string first_iteration_report_;
};

namespace detail {
// The tensors of a forward's output, as pointers so the output sink can replace them in place.
inline void output_tensors(Tensor& t, std::vector<Tensor*>& out) { out.push_back(&t); }
inline void output_tensors(std::vector<Tensor>& ts, std::vector<Tensor*>& out) {
  for (Tensor& t : ts) out.push_back(&t);
}
inline void output_tensors(std::map<std::string, Tensor>& ts, std::vector<Tensor*>& out) {
  for (auto& kv : ts) out.push_back(&kv.second);
}
template <typename T, typename = decltype(std::declval<T&>().for_each_tensor(std::declval<void (*)(Tensor&)>()))>
void output_tensors(T& value, std::vector<Tensor*>& out) {
  value.for_each_tensor([&out](Tensor& t) { out.push_back(&t); });
}
}  // namespace detail

template <typename Fn>
auto DistributedDataParallel::call(Fn&& run) {
  pre_forward();
  auto output = run();
  std::vector<Tensor*> slots;
  detail::output_tensors(output, slots);
  std::vector<Tensor> tensors;
  for (Tensor* t : slots) tensors.push_back(*t);
  tensors = post_forward(std::move(tensors));
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = tensors[i];
  return output;
}

}  // namespace ember::distributed
