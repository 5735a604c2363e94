// ProcessGroup: the abstract communication interface DDP stands on (PyTorch's c10d::ProcessGroup),
// one options struct per collective, and the process-wide default group (init_process_group,
// get_rank, new_group, ...). Backends (backends/mpi, later backends/nccl) register a factory by name.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/debug_level.h"
#include "distributed/work.h"
#include "tensor/tensor.h"

namespace ember::distributed {

class CollectiveLifecycle;  // distributed/collective_lifecycle.h
class StallInspector;       // distributed/diagnostics/stall_inspector.h
struct StallReport;

// Order matters: it is part of the DETAIL fingerprint.
enum class ReduceOp : int32_t { kSum = 0, kAvg, kProduct, kMin, kMax };
const char* reduce_op_name(ReduceOp op);

// Timeout "unset": the collective uses its group's timeout (Options::timeout).
constexpr std::chrono::milliseconds kUnsetTimeout{-1};
// PyTorch's default for CPU backends.
constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(10);

// broadcast's options (PyTorch's c10d::BroadcastOptions): the root rank and its tensor's index; a
// timeout of kUnsetTimeout, here and below, means the group's.
struct BroadcastOptions {
  int64_t root_rank = 0;
  int64_t root_tensor = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// allreduce's options (c10d::AllreduceOptions): the reduction, ReduceOp::kSum by default, and the timeout.
struct AllreduceOptions {
  ReduceOp reduce_op = ReduceOp::kSum;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct AllreduceCoalescedOptions : AllreduceOptions {};
// reduce's options (c10d::ReduceOptions): the reduction, the rank getting the result, the timeout.
struct ReduceOptions {
  ReduceOp reduce_op = ReduceOp::kSum;
  int64_t root_rank = 0;
  int64_t root_tensor = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// The options of the allgathers (c10d::AllgatherOptions): the timeout.
struct AllgatherOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// gather's options (c10d::GatherOptions): the rank that receives every input, and the timeout.
struct GatherOptions {
  int64_t root_rank = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// scatter's options (c10d::ScatterOptions): the rank whose inputs are scattered, and the timeout.
struct ScatterOptions {
  int64_t root_rank = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// reduce_scatter's options (c10d::ReduceScatterOptions): the reduction and the timeout.
struct ReduceScatterOptions {
  ReduceOp reduce_op = ReduceOp::kSum;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// The options of alltoall and alltoall_base (c10d::AllToAllOptions): the timeout.
struct AllToAllOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
// barrier's options (c10d::BarrierOptions): the timeout.
struct BarrierOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};

// A group of ranks and its collectives (PyTorch's c10d::ProcessGroup), implemented by a backend;
// each collective returns a Work to wait on. One the backend lacks throws ember::Error naming it.
class ProcessGroup {
 public:
  struct Options {
    std::string backend = "mpi";
    // Watchdog: a collective not finished after this long fails instead of hanging.
    std::chrono::milliseconds timeout = kDefaultTimeout;
    // Overrides EMBER_DISTRIBUTED_DEBUG for this group when set.
    bool has_debug_level = false;
    DebugLevel debug_level = DebugLevel::kOff;
    std::string group_name;  // for messages; "default_pg" or "group_<n>" when empty
  };

  ProcessGroup(int rank, int size, Options options);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Options& options() const { return options_; }
  const std::string& group_name() const { return options_.group_name; }
  DebugLevel debug_level() const;
  virtual std::string backend_name() const = 0;

  // The collectives (Note [One lifecycle for every collective]). Every one takes lists like
  // PyTorch's c10d (one tensor per device); a process drives one device, so each list holds exactly
  // one. Tensors are written in place; the Work's result() returns the outputs. Non-virtual: each
  // checks its arguments here, once for every backend, then calls the backend's run_ function.
  WorkPtr broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts = {});
  WorkPtr allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts = {});
  // Several tensors of one dtype reduced as one flat buffer (one collective instead of many).
  WorkPtr allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts = {});
  WorkPtr reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts = {});
  // output_tensors[0][r] receives rank r's input; sizes may differ between ranks (allgatherv).
  WorkPtr allgather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                    const AllgatherOptions& opts = {});
  // output = concatenation of every rank's input (all the same size).
  WorkPtr allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts = {});
  WorkPtr allgather_coalesced(std::vector<std::vector<Tensor>>& output_lists, std::vector<Tensor>& input_list,
                              const AllgatherOptions& opts = {});
  // Only the root passes output_tensors[0] (world-size tensors); other ranks pass an empty list.
  WorkPtr gather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                 const GatherOptions& opts = {});
  // Only the root passes input_tensors[0] (world-size tensors).
  WorkPtr scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                  const ScatterOptions& opts = {});
  // output_tensors[0] = reduction over ranks of input_tensors[0][rank].
  WorkPtr reduce_scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                         const ReduceScatterOptions& opts = {});
  // output = this rank's chunk of the reduction over ranks of `input`, which holds size() chunks
  // of output's numel (PyTorch's reduce_scatter_tensor).
  WorkPtr reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts = {});
  // Splits along dim 0; empty split lists mean equal splits.
  WorkPtr alltoall_base(Tensor& output, Tensor& input, const std::vector<int64_t>& output_split_sizes,
                        const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts = {});
  // output_tensors[r] receives rank r's input_tensors[this rank].
  WorkPtr alltoall(std::vector<Tensor>& output_tensors, std::vector<Tensor>& input_tensors,
                   const AllToAllOptions& opts = {});
  WorkPtr barrier(const BarrierOptions& opts = {});
  WorkPtr send(std::vector<Tensor>& tensors, int dst_rank, int tag);
  WorkPtr recv(std::vector<Tensor>& tensors, int src_rank, int tag);

  // A group over `ranks` (ranks of this group, sorted, unique). Every rank of this group must call
  // it; ranks not in `ranks` get nullptr. `options.timeout` etc. apply to the new group, which at
  // DETAIL is behind a ProcessGroupWrapper (Note [DETAIL fingerprints]).
  std::shared_ptr<ProcessGroup> new_subgroup(const std::vector<int>& ranks, Options options);

  // Where this backend's collectives read and write: the small control tensors DDP and Join make
  // (flags, model metadata, the used-parameter map) are created there, as PyTorch creates them on
  // the module's device for NCCL. The MPI backend takes any device (Note [CUDA tensors through the
  // MPI backend]); the NCCL backend its GPU.
  virtual Device collective_device() const { return kCPU; }

  // Why the group is unusable (a collective timed out, or the backend failed), or "" while it is
  // healthy; every later collective on it fails at once, naming this.
  std::string broken_reason() const;
  // Who did not arrive at the collective whose timeout broke this group (StallInspector); empty
  // while the group is healthy, or for a backend without a side channel. A group breaks at most
  // once, so this names the stall that later errors on the group refer to.
  StallReport stall_report() const;
  // The group's TCP side channel (stall queries, link probes), or nullptr for a backend without.
  const StallInspector* side_channel() const;

  // Bytes this rank has handed to collectives so far (the inputs' payload, not the algorithm's
  // traffic): what a comm hook's compression saves shows here. Backends count in their enqueue.
  virtual uint64_t payload_bytes() const { return payload_bytes_.load(std::memory_order_relaxed); }

 protected:
  // What a backend implements: the data movement of one collective, whose arguments the public
  // function of the same name has checked. One a backend lacks throws ember::Error naming it.
  virtual WorkPtr run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts);
  virtual WorkPtr run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts);
  virtual WorkPtr run_allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts);
  virtual WorkPtr run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts);
  virtual WorkPtr run_allgather(std::vector<std::vector<Tensor>>& output_tensors,
                                std::vector<Tensor>& input_tensors, const AllgatherOptions& opts);
  virtual WorkPtr run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts);
  virtual WorkPtr run_allgather_coalesced(std::vector<std::vector<Tensor>>& output_lists,
                                          std::vector<Tensor>& input_list, const AllgatherOptions& opts);
  virtual WorkPtr run_gather(std::vector<std::vector<Tensor>>& output_tensors,
                             std::vector<Tensor>& input_tensors, const GatherOptions& opts);
  virtual WorkPtr run_scatter(std::vector<Tensor>& output_tensors,
                              std::vector<std::vector<Tensor>>& input_tensors, const ScatterOptions& opts);
  virtual WorkPtr run_reduce_scatter(std::vector<Tensor>& output_tensors,
                                     std::vector<std::vector<Tensor>>& input_tensors,
                                     const ReduceScatterOptions& opts);
  virtual WorkPtr run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts);
  virtual WorkPtr run_alltoall_base(Tensor& output, Tensor& input, const std::vector<int64_t>& output_split_sizes,
                                    const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts);
  virtual WorkPtr run_alltoall(std::vector<Tensor>& output_tensors, std::vector<Tensor>& input_tensors,
                               const AllToAllOptions& opts);
  virtual WorkPtr run_barrier(const BarrierOptions& opts);
  virtual WorkPtr run_send(std::vector<Tensor>& tensors, int dst_rank, int tag);
  virtual WorkPtr run_recv(std::vector<Tensor>& tensors, int src_rank, int tag);
  // The backend's sub-group over `ranks`, which it checks; new_subgroup wraps it at DETAIL.
  virtual std::shared_ptr<ProcessGroup> run_new_subgroup(const std::vector<int>& ranks, Options options);

  // What the backend asks of every tensor a collective touches, beyond being defined: its
  // devices, layout and count limits. Throws naming `op` (op_label), the tensor and the rank.
  virtual void check_backend_tensor(const Tensor& t, const char* op) const {}
  // The class the errors name: "ProcessGroupMPI" makes "ProcessGroupMPI::allreduce: ...".
  virtual std::string class_name() const { return "ProcessGroup"; }
  std::string op_label(const char* op) const { return class_name() + "::" + op; }

  // A backend with a CollectiveLifecycle (every real one) hands it over in its constructor; the
  // group's broken_reason(), stall_report() and side_channel() then read it.
  void set_lifecycle(CollectiveLifecycle* lifecycle) { lifecycle_ = lifecycle; }

  [[noreturn]] void throw_unsupported(const char* what) const;
  // The timeout a collective runs under: its own when set, else the group's.
  std::chrono::milliseconds effective_timeout(std::chrono::milliseconds t) const {
    return t.count() >= 0 ? t : options_.timeout;
  }

  // Adds the inputs' bytes to payload_bytes() and returns them.
  uint64_t count_payload(const std::vector<Tensor>& inputs) {
    uint64_t n = 0;
    for (const Tensor& t : inputs) {
      if (t.defined()) n += static_cast<uint64_t>(t.numel()) * element_size(t.dtype());
    }
    payload_bytes_.fetch_add(n, std::memory_order_relaxed);
    return n;
  }

  const int rank_;
  const int size_;
  Options options_;
  std::atomic<uint64_t> payload_bytes_{0};

 private:
  // The DETAIL check sits in front of a backend's group and calls its run_ functions.
  friend class ProcessGroupWrapper;

  CollectiveLifecycle* lifecycle_ = nullptr;  // the backend's member, or none

  // The argument checks of the public collectives (process_group_collectives.cc): each throws
  // naming the collective (op_label), the tensors, and this rank and group.
  void check_tensor(const Tensor& t, const char* op) const;
  void check_one(const std::vector<Tensor>& tensors, const char* op) const;
  void check_peer(int64_t peer, const char* what, const char* op) const;
  void check_like(const Tensor& t, const Tensor& like, const char* op) const;
  // `lists` is one list of size() tensors of `like`'s dtype (and numel, with same_numel).
  void check_per_rank_list(const std::vector<std::vector<Tensor>>& lists, const Tensor& like, bool same_numel,
                           const char* what, const char* op) const;
  void check_splits(const Tensor& t, const std::vector<int64_t>& splits, const char* which, const char* op) const;
};
using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

// ---- backends ------------------------------------------------------------------------------------
// Creates the world group of a backend (rank and size come from the launcher, e.g. mpirun).
using BackendFactory = std::function<ProcessGroupPtr(const ProcessGroup::Options&)>;
// Called once per backend from its library (static registration; the target is alwayslink).
bool register_backend(const std::string& name, BackendFactory factory);
std::vector<std::string> registered_backends();
// This process's index among the job's processes on its host, from the launcher's environment
// (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, torchrun's LOCAL_RANK); 0 if
// none is set. With cuda_device_of_local_rank it picks a process's GPU.
int local_rank();

// ---- the default group (torch.distributed's module-level API) ------------------------------------
// Creates the default (world) group; throws if one exists or the backend is unknown.
ProcessGroupPtr init_process_group(const std::string& backend = "mpi",
                                   ProcessGroup::Options options = {});
// Destroys the default group and every group made by new_group (waiting for their queued work).
void destroy_process_group();
bool is_initialized();
ProcessGroupPtr get_default_group();  // throws if not initialized
int get_rank();
int get_world_size();
void barrier();
// A sub-group of the default group; every rank must call it (like torch.distributed.new_group).
// Ranks not in `ranks` get nullptr. A zero timeout means the default group's.
ProcessGroupPtr new_group(const std::vector<int>& ranks,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace ember::distributed
