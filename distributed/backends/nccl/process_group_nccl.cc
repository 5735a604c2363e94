// ProcessGroupNCCL: communicator set-up, the collective skeleton and the watchdog (docs/design.md steps
// 8-10 on CUDA tensors). The collectives themselves are in collectives_nccl.cc.
#include "distributed/backends/nccl/process_group_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "distributed/backends/mpi/process_group_mpi.h"
#include "distributed/backends/nccl/nccl_work.h"
#include "distributed/diagnostics/trace.h"
#include "tensor/cuda_stream.h"
#include "tensor/device_backend.h"
#include "tensor/factories.h"

namespace ember::distributed {

// Note [NCCL streams and completion]
// A collective is issued on the caller's thread: an event recorded on the caller's current stream
// makes the group's communication stream wait for the inputs, the NCCL calls go on the
// communication stream between a start and an end event, and the caller's stream does not wait:
// the compute queued after the call (the rest of backward) overlaps the communication. Whoever
// uses the result waits: Work::wait() blocks the host until the end event and makes the current
// stream wait on it, Work::synchronize() only the latter, and the Work's Future -- completed when
// the call is queued, as PyTorch's CUDAFuture is, so that then() callbacks (comm hooks) run at once
// on the issuing thread in the same order on every rank -- makes the current stream of whoever
// waits on it or runs a callback wait on the end event first (Future::set_stream_sync). The tensors
// stay referenced by the Work until the watchdog sees the end event: ember has no record_stream, so
// this is what keeps the caching allocator from reusing their blocks while NCCL still reads them.
// Under the CUDA simulator every stream is synchronous and the NCCL call returns when the
// collective is done; the events, waits and the watchdog run the same code.

namespace {

#define EMBER_CUDA_OK(call, what)                                                             \
  do {                                                                                        \
    const cudaError_t rc_ = (call);                                                           \
    EMBER_CHECK(rc_ == cudaSuccess, "ProcessGroupNCCL: ", what, " failed: ", cudaGetErrorString(rc_)); \
  } while (0)

ncclComm_t as_comm(void* c) { return static_cast<ncclComm_t>(c); }
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// Makes `stream` the current stream of `device` for a scope.
class CurrentStreamScope {
 public:
  CurrentStreamScope(int device, void* stream)
      : backend_(device_backend(DeviceType::kCUDA, "ProcessGroupNCCL")),
        device_(device),
        previous_(backend_.current_stream(device)) {
    backend_.set_current_stream(device, stream);
  }
  ~CurrentStreamScope() { backend_.set_current_stream(device_, previous_); }
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  DeviceBackend& backend_;
  int device_;
  void* previous_;
};

const bool kRegistered = register_backend("nccl", [](const ProcessGroup::Options& options) {
  ProcessGroup::Options bootstrap = options;
  bootstrap.backend = "mpi";
  bootstrap.group_name = (options.group_name.empty() ? "default_pg" : options.group_name) + "_bootstrap";
  ProcessGroupPtr mpi = ProcessGroupMPI::create_world(bootstrap);
  return std::static_pointer_cast<ProcessGroup>(std::make_shared<ProcessGroupNCCL>(mpi, options));
});

}  // namespace

std::string ProcessGroupNCCL::unavailable_reason() {
  const int devices = cuda_device_count();
  const std::string advice = "; use the MPI backend, which stages CUDA tensors through host memory";
  if (devices == 0) {
    return detail::str_cat("no CUDA device is visible", cuda_is_available() ? "" : " (ember was built without CUDA)",
                           advice);
  }
#ifndef EMBER_NCCL_SIMULATOR
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local_size != nullptr && std::atoi(local_size) > devices) {
    return detail::str_cat(local_size, " ranks on this host share ", devices,
                           " GPU(s), and NCCL needs a GPU per rank", advice, " (--backend=mpi)");
  }
#endif
  return "";
}

ProcessGroupNCCL::ProcessGroupNCCL(ProcessGroupPtr bootstrap, Options options)
    : ProcessGroup(bootstrap->rank(), bootstrap->size(), std::move(options)),
      bootstrap_(std::move(bootstrap)),
      lifecycle_(CollectiveLifecycle::Options{rank_, /*inject_faults=*/false}) {
  set_lifecycle(&lifecycle_);
  const std::string why = unavailable_reason();
  EMBER_CHECK(why.empty(), "ProcessGroupNCCL: rank ", rank_, ": ", why);
  device_ = cuda_device_of_local_rank(local_rank()).index;
  EMBER_CUDA_OK(cudaSetDevice(device_), "cudaSetDevice");
  // Rank 0's unique id, to every rank over the bootstrap group.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    EMBER_CHECK(rc == ncclSuccess, "ProcessGroupNCCL: ncclGetUniqueId failed on rank 0: ",
                ncclGetErrorString(rc), " (", ncclGetLastError(nullptr), ")");
  }
  Tensor id_bytes = empty({static_cast<int64_t>(sizeof(id))}, TensorOptions(kByte));
  std::memcpy(id_bytes.data_ptr(), &id, sizeof(id));
  std::vector<Tensor> list{id_bytes};
  bootstrap_->broadcast(list)->wait();
  std::memcpy(&id, id_bytes.data_ptr(), sizeof(id));
  // Every member is here, so the side channel's endpoints travel with the id's broadcast.
  const std::string mine = lifecycle_.inspector().endpoint().to_wire();
  Tensor my_endpoint = empty({static_cast<int64_t>(mine.size())}, TensorOptions(kByte));
  std::memcpy(my_endpoint.data_ptr(), mine.data(), mine.size());
  Tensor endpoints = empty({size_ * static_cast<int64_t>(mine.size())}, TensorOptions(kByte));
  bootstrap_->allgather_base(endpoints, my_endpoint)->wait();
  lifecycle_.inspector().set_peers(SideChannelEndpoint::all_from_wire(static_cast<const char*>(endpoints.data_ptr()), size_));
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRank(&comm, size_, id, rank_);
  EMBER_CHECK(rc == ncclSuccess, "ProcessGroupNCCL: ncclCommInitRank failed on rank ", rank_, " of ",
              size_, " (device ", device_, "): ", ncclGetErrorString(rc), " (", ncclGetLastError(nullptr), ")");
  comm_ = comm;
  // From the pool, never destroyed: blocks allocated on a group's stream outlive the group in the
  // caching allocator (PyTorch takes its NCCL streams from its pool too).
  stream_ = CudaStream::from_pool(device_).handle();
  cudaEvent_t ready = nullptr;
  EMBER_CUDA_OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  ready_ = ready;
  cudaEvent_t origin = nullptr;
  EMBER_CUDA_OK(cudaEventCreate(&origin), "cudaEventCreate");
  trace_origin_ = origin;
  EMBER_CUDA_OK(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
  EMBER_CUDA_OK(cudaEventRecord(origin, as_stream(stream_)), "cudaEventRecord");
  EMBER_CUDA_OK(cudaEventSynchronize(origin), "cudaEventSynchronize");
  trace_origin_us_ = Trace::now_us();
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  bool aborted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted = aborted_;
    for (auto& work : pending_) work->release_tensors();
    pending_.clear();
  }
  if (!aborted) {
    cudaStreamSynchronize(as_stream(stream_));
    ncclCommDestroy(as_comm(comm_));
  }
  cudaEventDestroy(as_event(ready_));
  cudaEventDestroy(as_event(trace_origin_));
}

void ProcessGroupNCCL::check_backend_tensor(const Tensor& t, const char* op) const {
  EMBER_CHECK(t.is_cuda() && t.device().index == device_, op_label(op), ": rank ", rank_,
              " communicates from cuda:", device_, ", got ", t.describe(),
              " (move it with .to(Device(\"cuda:", device_, "\")), or use the MPI backend for CPU tensors)");
  EMBER_CHECK(t.is_contiguous(), op_label(op), ": tensors must be contiguous, got ", t.describe(), " on rank ",
              rank_);
}

WorkPtr ProcessGroupNCCL::collective(OpType op, const std::vector<Tensor>& inputs,
                                     std::vector<Tensor> outputs, std::chrono::milliseconds timeout,
                                     int reduce_op, int root, Steps steps) {
  count_payload(inputs);
  std::lock_guard<std::mutex> issue(issue_mutex_);
  const uint64_t seq = lifecycle_.next_sequence_number();
  const std::string fingerprint = CollectiveFingerprint::make(op, seq, inputs, reduce_op, root).str();
  const std::string description = detail::str_cat(fingerprint, " on rank ", rank_, " of ", size_, " in group ",
                                                  group_name(), " (cuda:", device_, ")");
  try {
    lifecycle_.enter(seq, fingerprint);
  } catch (const std::exception& e) {
    lifecycle_.finish(seq, false);
    EMBER_THROW(description, ": ", e.what());
  }
  std::vector<Tensor> keep_alive = inputs;
  keep_alive.insert(keep_alive.end(), outputs.begin(), outputs.end());
  auto work = std::make_shared<NcclWork>(NcclWork::Options{op, seq, outputs, device_, effective_timeout(timeout),
                                                            fingerprint, description, TraceLabel::current(),
                                                            std::move(keep_alive)});
  {
    // Registered before the NCCL calls: a call that blocks (the simulator, a full NCCL queue) is
    // timed out by the watchdog like one that never completes on the device.
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(work);
  }
  cv_.notify_all();
  std::string failure;
  const int rc = issue_on_stream(*work, steps, &failure);
  if (rc != ncclSuccess) {
    // The watchdog's timeout error, if it aborted this call, names the cause; else NCCL's.
    work->fail(std::make_exception_ptr(Error(description + ": " + failure)));
    if (rc == ncclSystemError || rc == ncclRemoteError || rc == ncclInternalError) {
      break_group(detail::str_cat(description, " failed: ", failure));
    }
    work->finish(work->error());
    return work;
  }
  std::shared_ptr<void> end = work->shared_end_event();
  const int device = device_;
  work->get_future()->set_stream_sync([end, device] { make_current_stream_wait(device, end.get()); });
  work->finish();
  return work;
}

int ProcessGroupNCCL::issue_on_stream(NcclWork& work, const Steps& steps, std::string* failure) {
  int rc = ncclSuccess;
  try {
    DeviceBackend& backend = device_backend(DeviceType::kCUDA, "ProcessGroupNCCL");
    EMBER_CUDA_OK(cudaEventRecord(as_event(ready_), as_stream(backend.current_stream(device_))),
                  "cudaEventRecord");
    EMBER_CUDA_OK(cudaStreamWaitEvent(as_stream(stream_), as_event(ready_), 0), "cudaStreamWaitEvent");
    CurrentStreamScope on_comm_stream(device_, stream_);
    if (steps.prepare) steps.prepare();
    EMBER_CUDA_OK(cudaEventRecord(as_event(work.start_event()), as_stream(stream_)), "cudaEventRecord");
    rc = steps.launch(stream_);
    if (rc == ncclSuccess) {
      // The end event follows the completion step (copies out of a flat buffer, also on this
      // stream): a stream that waits for the work reads what those copies wrote.
      if (steps.complete) steps.complete();
      EMBER_CUDA_OK(cudaEventRecord(as_event(work.end_event()), as_stream(stream_)), "cudaEventRecord");
      work.mark_enqueued();
    } else {
      *failure = detail::str_cat(ncclGetErrorString(static_cast<ncclResult_t>(rc)), " (",
                                 ncclGetLastError(nullptr), ")");
    }
  } catch (const std::exception& e) {
    rc = ncclInternalError;
    *failure = e.what();
  }
  return rc;
}

void ProcessGroupNCCL::break_group(const std::string& why, StallReport report) {
  lifecycle_.break_group(why, std::move(report));
  std::list<std::shared_ptr<NcclWork>> pending;
  bool abort = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_) {
      aborted_ = true;
      abort = true;
    }
    pending.swap(pending_);
  }
  const std::string message = why + ". The communicator was aborted and the group " + group_name() +
                              " is unusable; later collectives on it fail immediately";
  for (auto& work : pending) {
    if (!work->is_completed()) work->fail(std::make_exception_ptr(Error(message)));
  }
  // Aborting returns a call blocked in NCCL (the simulator's peers that never arrive) with an error.
  if (abort) ncclCommAbort(as_comm(comm_));
  for (auto& work : pending) work->release_tensors();
}

void ProcessGroupNCCL::watchdog_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<NcclWork>> completed;
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(pending_.empty() ? 100 : 2));
    if (stop_ || aborted_) continue;
    std::string why;
    std::shared_ptr<NcclWork> expired;
    const auto now = std::chrono::steady_clock::now();
    const bool tracing = Trace::get().enabled();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if ((*it)->is_completed()) {
        lifecycle_.finish((*it)->sequence_number(), !(*it)->error());
        (*it)->release_tensors();
        if (tracing) completed.push_back(*it);
        it = pending_.erase(it);
        continue;
      }
      if ((*it)->timed_out(now)) {
        expired = *it;
        break;
      }
      ++it;
    }
    if (!expired) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(as_comm(comm_), &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        why = detail::str_cat("NCCL reported an asynchronous error on rank ", rank_, " of ", size_,
                              " in group ", group_name(), ": ", ncclGetErrorString(async));
      }
    }
    if (expired || !why.empty() || !completed.empty()) {
      lock.unlock();
      for (const auto& work : completed) trace_device_span(*work);
      completed.clear();
      StallReport report;
      if (expired) {
        why = timeout_error(*expired, &report);
        // Broken before the work fails: its waiter may read stall_report() or issue again at once.
        lifecycle_.break_group(why, report);
        expired->fail(std::make_exception_ptr(Error(why)));
        lifecycle_.finish(expired->sequence_number(), false);
      }
      if (!why.empty()) break_group(why, std::move(report));
      lock.lock();
    }
  }
}

std::string ProcessGroupNCCL::timeout_error(const NcclWork& work, StallReport* found) {
  // Sockets only, bounded by the inspector's budget: the communicator may be stuck.
  StallReport report = summarize_stall(work.sequence_number(), work.fingerprint(), lifecycle_.inspector().query_peers());
  const char* advice = report.not_arrived.empty()
                           ? "a rank may have called a different collective, or NCCL is stuck"
                           : "a rank that does not arrive may have skipped this collective, called a different "
                             "one, stalled, or died";
  std::string why = detail::str_cat(work.description(), " timed out after ", work.timeout().count(),
                                    " ms (the group's watchdog timeout): ", report.summary, " -- ", advice);
  *found = std::move(report);
  return why;
}

void ProcessGroupNCCL::trace_device_span(const NcclWork& work) const {
  float begin_ms = 0, duration_ms = 0;
  if (!work.device_span(trace_origin_, &begin_ms, &duration_ms)) return;
  const std::string& label = work.trace_label();
  Trace::get().span(detail::str_cat(op_type_name(work.op_type()), " #", work.sequence_number(),
                                    label.empty() ? "" : " ", label, " (GPU)"),
                    "nccl", trace_origin_us_ + 1000.0 * begin_ms, 1000.0 * duration_ms, 2,
                    detail::str_cat("{\"sequence_number\":", work.sequence_number(), ",\"label\":\"", label,
                                    "\",\"device\":", device_, "}"));
}

ProcessGroupPtr ProcessGroupNCCL::run_new_subgroup(const std::vector<int>& ranks, Options options) {
  Options bootstrap = options;
  bootstrap.backend = "mpi";
  bootstrap.group_name = options.group_name + "_bootstrap";
  ProcessGroupPtr sub = bootstrap_->new_subgroup(ranks, bootstrap);
  if (sub == nullptr) return nullptr;
  if (!options.has_debug_level) {
    options.has_debug_level = options_.has_debug_level;
    options.debug_level = options_.debug_level;
  }
  return std::make_shared<ProcessGroupNCCL>(sub, std::move(options));
}

}  // namespace ember::distributed
