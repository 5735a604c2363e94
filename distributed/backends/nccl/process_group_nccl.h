// ProcessGroupNCCL: the GPU backend (PyTorch's ProcessGroupNCCL), docs/design.md steps 8-10 on CUDA
// tensors. One communicator per group over one device per process; its unique id travels over an
// MPI group of the same processes (the bootstrap). Every collective runs on the group's own
// communication stream, ordered after the issuing thread's current stream by an event, so it
// overlaps the compute that follows (Note [NCCL streams and completion]). A watchdog thread polls
// the pending collectives and the communicator's asynchronous error, and aborts the communicator
// when one outlives its timeout: the Work then fails with an ember::Error naming the collective,
// its sequence number, sizes and rank, as the MPI backend's do.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_lifecycle.h"
#include "distributed/diagnostics/debug.h"
#include "distributed/process_group.h"

namespace ember::distributed {

class NcclWork;

class ProcessGroupNCCL : public ProcessGroup {
 public:
  // A group over the processes of `bootstrap` (an MPI group), which carries the unique id; every
  // member must call it. The device is cuda_device_of_local_rank(local_rank()). Throws
  // unavailable_reason() when there is one.
  ProcessGroupNCCL(ProcessGroupPtr bootstrap, Options options);
  ~ProcessGroupNCCL() override;

  // Why this process cannot join an NCCL communicator here, or "" if it can: no GPU visible, or
  // more ranks on this host than GPUs (NCCL refuses two ranks on one GPU; the simulated NCCL
  // allows it). Such ranks can share a GPU over the MPI backend, which stages through the host.
  static std::string unavailable_reason();

  std::string backend_name() const override { return "nccl"; }
  int device_index() const { return device_; }
  Device collective_device() const override { return Device(DeviceType::kCUDA, device_); }

 protected:
  ProcessGroupPtr run_new_subgroup(const std::vector<int>& ranks, Options options) override;
  WorkPtr run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) override;
  WorkPtr run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) override;
  WorkPtr run_allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts) override;
  WorkPtr run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) override;
  WorkPtr run_allgather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                        const AllgatherOptions& opts) override;
  WorkPtr run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) override;
  WorkPtr run_reduce_scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                             const ReduceScatterOptions& opts) override;
  WorkPtr run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) override;
  WorkPtr run_alltoall_base(Tensor& output, Tensor& input, const std::vector<int64_t>& output_split_sizes,
                            const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) override;
  WorkPtr run_barrier(const BarrierOptions& opts) override;
  // Contiguous tensors on this rank's GPU.
  void check_backend_tensor(const Tensor& t, const char* op) const override;
  std::string class_name() const override { return "ProcessGroupNCCL"; }

 private:
  // What one collective does on the communication stream: `prepare` (ember ops, e.g. flattening),
  // `launch` (the NCCL calls; returns the first failure), `complete` (copies out of a staging
  // buffer). Each runs with the communication stream current.
  struct Steps {
    std::function<void()> prepare;
    std::function<int(void* stream)> launch;
    std::function<void()> complete;
  };
  WorkPtr collective(OpType op, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                     std::chrono::milliseconds timeout, int reduce_op, int root, Steps steps);
  // Orders the communication stream after the caller's, then runs the steps on it between the
  // work's start and end events; returns NCCL's result (ncclInternalError for a CUDA or ember
  // error), with what failed in `failure`.
  int issue_on_stream(NcclWork& work, const Steps& steps, std::string* failure);
  void watchdog_loop();
  // The error for a collective past its timeout, naming the ranks that did not arrive (asked over
  // the stall inspector's side channel, within its budget, and left in `report`).
  std::string timeout_error(const NcclWork& work, StallReport* report);
  // The collective's span on the communication stream, on the trace's GPU lane.
  void trace_device_span(const NcclWork& work) const;
  // Marks the group unusable and aborts the communicator (once); pending Works fail with `why`.
  void break_group(const std::string& why, StallReport report = {});

  ProcessGroupPtr bootstrap_;
  int device_ = 0;
  void* comm_ = nullptr;    // ncclComm_t; aborted at most once, then never used again
  void* stream_ = nullptr;  // cudaStream_t: the communication stream
  void* ready_ = nullptr;   // cudaEvent_t: the issuing stream's point a collective waits for
  // A timing cudaEvent_t reached at host time trace_origin_us_ (Trace::now_us): device spans are
  // placed on the host's timeline relative to it.
  void* trace_origin_ = nullptr;
  double trace_origin_us_ = 0;
  std::mutex issue_mutex_;  // one collective issued at a time, in the same order on every rank

  // Sequence numbers (taken under issue_mutex_), the broken group, and each rank's last issued
  // collective for the peers' timeout errors (Note [Stall inspector side channel]; its endpoints
  // are exchanged over the bootstrap group).
  CollectiveLifecycle lifecycle_;

  mutable std::mutex mutex_;  // guards aborted_, pending_, stop_
  std::condition_variable cv_;
  bool aborted_ = false;
  bool stop_ = false;
  std::list<std::shared_ptr<NcclWork>> pending_;  // issued, not yet seen complete by the watchdog
  std::thread watchdog_;
};

}  // namespace ember::distributed
