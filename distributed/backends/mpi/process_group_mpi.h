// ProcessGroupMPI: the CPU backend over OpenMPI (PyTorch's ProcessGroupMPI). One worker thread runs
// the queued collectives in submission order with nonblocking MPI calls it polls, so a collective
// that a peer never joins times out with a clear error instead of hanging (the watchdog). A
// collective issued from a Future callback on that worker runs inline, at once (docs/design.md step 10:
// multi-round comm hooks; Note [Collectives issued from callbacks run inline]). Before a timeout
// throws, the worker asks the peers over a side channel which of them did not arrive
// (Note [Stall inspector side channel], distributed/diagnostics/stall_inspector.h).
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_lifecycle.h"
#include "distributed/diagnostics/debug.h"
#include "distributed/process_group.h"
#include "tensor/cuda_stream.h"

namespace ember::distributed {

class ProcessGroupMPI : public ProcessGroup {
 public:
  // Initialises MPI (MPI_THREAD_MULTIPLE) unless the program already did, and returns the world
  // group over a duplicate of MPI_COMM_WORLD (so raw MPI use elsewhere cannot interleave with ours).
  static std::shared_ptr<ProcessGroupMPI> create_world(Options options);
  // Takes ownership of `comm`. With inject_faults (the world group), EMBER_FAULT_STALL_* apply
  // (distributed/diagnostics/fault_injection.h).
  ProcessGroupMPI(MPI_Comm comm, Options options, bool inject_faults = false);
  ~ProcessGroupMPI() override;

  std::string backend_name() const override { return "mpi"; }
  MPI_Comm communicator() const { return comm_; }

 protected:
  ProcessGroupPtr run_new_subgroup(const std::vector<int>& ranks, Options options) override;
  WorkPtr run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) override;
  WorkPtr run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) override;
  WorkPtr run_allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts) override;
  WorkPtr run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) override;
  WorkPtr run_allgather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                        const AllgatherOptions& opts) override;
  WorkPtr run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) override;
  WorkPtr run_gather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                     const GatherOptions& opts) override;
  WorkPtr run_scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                      const ScatterOptions& opts) override;
  WorkPtr run_reduce_scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                             const ReduceScatterOptions& opts) override;
  WorkPtr run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) override;
  WorkPtr run_alltoall_base(Tensor& output, Tensor& input, const std::vector<int64_t>& output_split_sizes,
                            const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) override;
  WorkPtr run_alltoall(std::vector<Tensor>& output_tensors, std::vector<Tensor>& input_tensors,
                       const AllToAllOptions& opts) override;
  WorkPtr run_barrier(const BarrierOptions& opts) override;
  // CPU and CUDA tensors (staged through host memory), of at most INT_MAX elements.
  void check_backend_tensor(const Tensor& t, const char* op) const override;
  std::string class_name() const override { return "ProcessGroupMPI"; }

 private:
  // One queued collective. `start` posts nonblocking MPI calls (appending their requests) and runs
  // on the worker; `finish` runs after they complete (copy-back, AVG's division).
  struct Entry {
    WorkPtr work;
    CollectiveFingerprint fingerprint;
    std::chrono::milliseconds timeout{0};
    uint64_t payload_bytes = 0;  // the inputs' bytes (how long wait_requests polls before sleeping)
    std::string trace_label;     // TraceLabel::current() at enqueue, while tracing ("bucket 3")
    std::function<void(std::vector<MPI_Request>&)> start;
    std::function<void()> finish;
    // With CUDA tensors: recorded on the caller's current stream at enqueue; the worker waits for
    // it before staging (Note [CUDA tensors through the MPI backend]).
    std::shared_ptr<CudaEvent> inputs_ready;
  };

  WorkPtr enqueue(OpType op, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                  std::chrono::milliseconds timeout, int reduce_op, int root, bool sizes_may_differ,
                  std::function<void(std::vector<MPI_Request>&)> start,
                  std::function<void()> finish = nullptr);
  void run_loop();
  void run_entry(std::unique_ptr<Entry> entry);
  // Posts the entry's MPI calls, waits for them, and runs its finish step.
  void move_data(Entry& entry);
  // The error of a collective that timed out; breaks the group (Note [Stall inspector side channel]).
  std::exception_ptr timed_out(const Entry& entry, const char* what, StallReport report);
  // The collective's run on the worker, as a trace span (Note [Queued, waiting, moving]).
  void trace_run(const Entry& entry, double started_us) const;
  // Polls until every request completes; throws on an MPI error or when the deadline passes.
  void wait_requests(std::vector<MPI_Request>& requests, Entry& entry, const char* phase);
  // "allreduce #3 (SUM, float32 [4], ...) on rank 1 of 2 in group default_pg"
  std::string describe(const Entry& entry) const;
  // Exchanges the side-channel endpoints over comm_ (once, at construction).
  void exchange_side_channel_endpoints();

  MPI_Comm comm_;
  CollectiveLifecycle lifecycle_;
  std::thread worker_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Entry>> queue_;
  std::atomic<size_t> queued_{0};
  bool stop_ = false;
  std::vector<std::unique_ptr<Entry>> abandoned_;  // worker thread only
  // A broken group's abandoned entries outlive it: MPI may still write into their buffers.
  static void keep_for_process_lifetime(std::vector<std::unique_ptr<Entry>> entries);
};

}  // namespace ember::distributed
