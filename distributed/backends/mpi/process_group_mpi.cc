#include "distributed/backends/mpi/process_group_mpi.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>

#include "distributed/backends/mpi/mpi_types.h"
#include "distributed/diagnostics/fault_injection.h"
#include "distributed/poll_backoff.h"
#include "distributed/diagnostics/trace.h"
#include "distributed/utils.h"
#include "tensor/factories.h"

namespace ember::distributed {
namespace {

// MPI counts are int.
int count_of(int64_t n, const char* op) {
  EMBER_CHECK(n <= INT_MAX, op, ": ", n, " elements exceed MPI's int count limit");
  return static_cast<int>(n);
}

// Note [Open MPI's progress under ThreadSanitizer]
// Open MPI's progress engine is process-wide: a worker testing its own group's requests may move
// the payload of another group's collective (a memcpy of the tensor, seen by TSan), and the other
// worker then learns of the completion through Open MPI's own atomics, which TSan cannot see. The
// order is real but invisible, so the reader that frees the tensor after wait() looks like it races
// with that copy. Under TSan every worker's nonblocking MPI calls (starting a collective, testing
// it) take one process-wide mutex, which makes the edge visible; other builds take no lock. The
// called_from_lib suppressions (tests/sanitizers/tsan.supp) cannot cover the copy: it is made in a
// component Open MPI dlopens and dlcloses, and a report whose copying stack TSan can no longer
// restore is not matched by a stack suppression.
#if defined(__SANITIZE_THREAD__)
std::mutex g_mpi_progress_mutex;
using MpiProgressGuard = std::lock_guard<std::mutex>;
#define EMBER_MPI_PROGRESS_GUARD MpiProgressGuard mpi_progress_guard_(g_mpi_progress_mutex)
#else
#define EMBER_MPI_PROGRESS_GUARD \
  do {                           \
  } while (0)
#endif

// Set once any group of this process timed out (process-wide by nature: it decides how the process
// leaves MPI).
std::atomic<bool> g_a_group_timed_out{false};

// Collectives that timed out may remain pending (abandoned entries, the broken communicator), and
// MPI_Finalize waits for the ranks that never arrived: a stalled rank would then hang the whole
// job at exit. A process that saw a timeout aborts the job instead, so every rank and mpirun exit
// within the timeout.
void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_a_group_timed_out.load()) {
    std::fprintf(stderr,
                 "[ember.distributed] a collective timed out in this process: aborting the job (MPI_Abort) "
                 "rather than waiting in MPI_Finalize for the ranks that did not arrive\n");
    std::fflush(stderr);
    // Peers that timed out on the same fault may still be inspecting it (at most the inspector's
    // budget) and MPI_Abort kills them: wait that long, so every rank's diagnosis gets printed.
    // PyTorch waits likewise before tearing a timed-out job down (TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC).
    std::this_thread::sleep_for(StallInspector::kDefaultBudget + std::chrono::milliseconds(500));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  mpi::free_mpi_types();
  MPI_Finalize();
}

const bool kRegistered = register_backend("mpi", [](const ProcessGroup::Options& options) {
  return std::static_pointer_cast<ProcessGroup>(ProcessGroupMPI::create_world(options));
});

}  // namespace

namespace {
int comm_rank(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int comm_size(MPI_Comm c) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}
}  // namespace

std::shared_ptr<ProcessGroupMPI> ProcessGroupMPI::create_world(Options options) {
  (void)kRegistered;
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    EMBER_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS,
                "ProcessGroupMPI: MPI_Init_thread failed");
    // PyTorch does the same: MPI cannot be re-initialised, so finalise once, at exit.
    std::atexit(finalize_mpi_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  EMBER_CHECK(provided >= MPI_THREAD_MULTIPLE,
              "ProcessGroupMPI: needs MPI_THREAD_MULTIPLE (the worker thread and the caller may "
              "both call MPI), but this MPI provides level ", provided);
  mpi::init_mpi_types();
  MPI_Comm comm;
  EMBER_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS,
              "ProcessGroupMPI: MPI_Comm_dup(MPI_COMM_WORLD) failed");
  // Read before the group exists, so a malformed EMBER_FAULT_STALL_* fails at start-up.
  const int stall_rank = stall_fault_from_env().rank;
  EMBER_CHECK(stall_rank < comm_size(comm), "EMBER_FAULT_STALL_RANK=", stall_rank,
              " is not a rank of this job of ", comm_size(comm), " ranks");
  return std::make_shared<ProcessGroupMPI>(comm, std::move(options), /*inject_faults=*/stall_rank >= 0);
}

ProcessGroupMPI::ProcessGroupMPI(MPI_Comm comm, Options options, bool inject_faults)
    : ProcessGroup(comm_rank(comm), comm_size(comm), std::move(options)),
      comm_(comm),
      lifecycle_(CollectiveLifecycle::Options{rank_, inject_faults}) {
  set_lifecycle(&lifecycle_);
  // Errors come back as codes we turn into ember::Error, instead of aborting the job.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  exchange_side_channel_endpoints();
  if (debug_level() >= DebugLevel::kInfo && rank_ == 0) {
    std::fprintf(stderr, "[ember.distributed] process group %s: backend mpi, %d ranks, timeout %lld ms, debug %s\n",
                 group_name().c_str(), size_, static_cast<long long>(options_.timeout.count()),
                 debug_level_name(debug_level()));
  }
  worker_ = std::thread([this] { run_loop(); });
}

ProcessGroupMPI::~ProcessGroupMPI() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();  // drains the queue; each entry is bounded by its timeout
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A timed-out collective may still be pending on comm_: freeing it could hang or crash, so a
  // broken group leaks its communicator (and the abandoned buffers) on purpose.
  if (!finalized && !lifecycle_.broken()) MPI_Comm_free(&comm_);
  if (lifecycle_.broken()) keep_for_process_lifetime(std::move(abandoned_));  // MPI may still write into them
}

void ProcessGroupMPI::keep_for_process_lifetime(std::vector<std::unique_ptr<Entry>> entries) {
  // Reachable from a global, so never freed yet not a leak to LeakSanitizer (it reports only
  // unreachable memory).
  static auto* kept = new std::vector<std::unique_ptr<Entry>>();
  static std::mutex kept_mutex;  // groups may be destroyed on several threads
  std::lock_guard<std::mutex> lock(kept_mutex);
  for (auto& e : entries) kept->push_back(std::move(e));
}

// Every member builds the group together, so this blocking allgather cannot meet a rank that
// skipped it; after a timeout the communicator is never used for this again (Note [Stall
// inspector side channel]).
void ProcessGroupMPI::exchange_side_channel_endpoints() {
  const std::string mine = lifecycle_.inspector().endpoint().to_wire();
  std::vector<char> all(SideChannelEndpoint::kWireSize * static_cast<size_t>(size_));
  EMBER_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                            static_cast<int>(mine.size()), MPI_CHAR, comm_) == MPI_SUCCESS,
              "ProcessGroupMPI: exchanging the stall inspector's endpoints (MPI_Allgather) failed "
              "in group ", group_name());
  lifecycle_.inspector().set_peers(SideChannelEndpoint::all_from_wire(all.data(), size_));
}

std::string ProcessGroupMPI::describe(const Entry& e) const {
  return detail::str_cat(e.fingerprint.str(), " on rank ", rank_, " of ", size_, " in group ",
                         group_name());
}

void ProcessGroupMPI::check_backend_tensor(const Tensor& t, const char* op) const {
  // CUDA tensors are staged through host memory (Note [CUDA tensors through the MPI backend]).
  EMBER_CHECK(t.is_cpu() || t.is_cuda(), op_label(op), ": the MPI backend takes CPU and CUDA tensors, got ",
              t.describe(), " on rank ", rank_);
  count_of(t.numel(), op);
}

// ---- the queue and the worker ------------------------------------------------------------------

// Note [Collectives issued from callbacks run inline]
// A comm hook with several rounds (PowerSGD's P then Q, the sparse path's sizes then data) chains
// the later rounds on futures, so the autograd thread never blocks and backward keeps overlapping
// communication. The later round is then issued from a callback, which runs on this worker right
// after the round before it completed (Note [Callbacks run on the worker]) -- while the autograd
// thread may be queueing the next bucket, at a different moment on every rank. Queued behind that
// bucket on one rank and ahead of it on another, the ranks would pair different collectives.
// So a collective issued on the worker thread is not queued: enqueue() runs it at once, before the
// worker takes its next entry, and returns it completed. "P_i completes -> its callback allreduces
// Q_i" then sits at the same point of the sequence on every rank whatever the autograd thread did
// meanwhile. The callback may also run on the issuing thread, when P_i had already completed as
// it was attached; Q_i is then queued at once, and the result is the same sequence provided the
// issuing thread attaches a round's continuation before it issues its next collective (every hook
// in distributed/hooks/ does). Because inline entries overtake queued ones, sequence numbers are
// given when an entry starts (run_entry), not when it is queued, so every rank numbers the same
// collective the same; DETAIL's fingerprint exchanges go through this order too (Note [DETAIL
// fingerprints]).
// The worker is marked as a communication thread (mark_comm_thread): a callback that waits there
// on something incomplete -- a collective queued behind it -- gets an error instead of a deadlock.
// An inline collective is complete when it is returned, so waiting on it is fine. Only the group's
// own worker runs inline: a callback issuing on another group queues there like any caller.
// Running the Q round on the worker frees the hook, not a core: with one core per rank the step
// time stays the same; the gain is on a rank that reaches a bucket before its peers
// (bench/comm_hooks_bench.sh measures it).

WorkPtr ProcessGroupMPI::enqueue(OpType op, const std::vector<Tensor>& inputs,
                                 std::vector<Tensor> outputs, std::chrono::milliseconds timeout,
                                 int reduce_op, int root, bool sizes_may_differ,
                                 std::function<void(std::vector<MPI_Request>&)> start,
                                 std::function<void()> finish) {
  auto entry = std::make_unique<Entry>();
  entry->payload_bytes = count_payload(inputs);
  if (Trace::get().enabled()) entry->trace_label = TraceLabel::current();
  entry->timeout = effective_timeout(timeout);
  entry->start = std::move(start);
  entry->finish = std::move(finish);
  // Numbered by run_entry when it starts (Note [Collectives issued from callbacks run inline]).
  entry->fingerprint = CollectiveFingerprint::make(op, kUnassignedSequenceNumber, inputs, reduce_op,
                                                   root, sizes_may_differ);
  const auto on_cuda = [](const Tensor& t) { return t.defined() && t.is_cuda(); };
  const auto cuda_in = std::find_if(inputs.begin(), inputs.end(), on_cuda);
  const auto cuda_out = std::find_if(outputs.begin(), outputs.end(), on_cuda);
  if (cuda_in != inputs.end() || cuda_out != outputs.end()) {
    const Tensor& t = cuda_in != inputs.end() ? *cuda_in : *cuda_out;
    entry->inputs_ready = std::make_shared<CudaEvent>();
    entry->inputs_ready->record(CudaStream::current(t.device().index));
  }
  WorkPtr work = std::make_shared<Work>(op, kUnassignedSequenceNumber, std::move(outputs));
  entry->work = work;
  if (std::this_thread::get_id() == worker_.get_id()) {
    run_entry(std::move(entry));  // from a callback: runs now, even while the group drains
    return work;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_CHECK(!stop_, "ProcessGroupMPI: group ", group_name(), " is being destroyed");
    queue_.push_back(std::move(entry));
    queued_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
  return work;
}

namespace {
// Note [Polling without spinning] (distributed/poll_backoff.h): the defaults (32 spins, 25 us sleeps,
// 1 ms ones past a second), with a yield phase of 200 us plus as long as the collective's bytes take
// at 1 GB/s, below what shared memory moves (bench/allreduce_bench.sh); the comm thread's timer
// slack is 1 us, so that its sleeps last what they ask for.
constexpr double kPollYieldNanosecondsPerByte = 1.0;
constexpr unsigned long kPollTimerSlackNanoseconds = 1000;

PollBackoffOptions mpi_poll_options(uint64_t bytes) {
  PollBackoffOptions o;
  o.yield_for += std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(bytes) * kPollYieldNanosecondsPerByte));
  return o;
}
}  // namespace

void ProcessGroupMPI::run_loop() {
  mark_comm_thread("mpi");
  // Note [Polling without spinning]: its sleeps last what they ask for.
  prctl(PR_SET_TIMERSLACK, kPollTimerSlackNanoseconds);
  while (true) {
    std::unique_ptr<Entry> entry;
    // Spin briefly before sleeping: back-to-back collectives (DDP's buckets, a benchmark loop) then
    // start without a futex wake-up, which costs more than a small collective itself.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    while (queued_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      entry = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_release);
    }
    run_entry(std::move(entry));
  }
}

namespace {
// The watchdog's error, with what the stall inspector found.
struct TimeoutError : Error {
  TimeoutError(std::string message, StallReport found)
      : Error(std::move(message)), report(std::move(found)) {}
  StallReport report;
};
}  // namespace

void ProcessGroupMPI::wait_requests(std::vector<MPI_Request>& requests, Entry& entry,
                                    const char* phase) {
  if (requests.empty()) return;
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + entry.timeout;
  PollBackoff backoff(mpi_poll_options(entry.payload_bytes), begin);
  std::vector<MPI_Status> statuses(requests.size());
  while (true) {
    int done = 0;
    int rc;
    {
      EMBER_MPI_PROGRESS_GUARD;  // Note [Open MPI's progress under ThreadSanitizer]
      rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
    }
    if (rc != MPI_SUCCESS) {
      std::string detail = mpi::mpi_error_string(rc);
      if (rc == MPI_ERR_IN_STATUS) {
        for (const auto& s : statuses) {
          if (s.MPI_ERROR != MPI_SUCCESS) detail += "; " + mpi::mpi_error_string(s.MPI_ERROR);
        }
      }
      EMBER_THROW(phase, " failed: ", detail);
    }
    if (done) return;
    // OpenMPI progresses shared-memory transfers only inside MPI_Test, so keep polling, but not
    // spinning for long (Note [Polling without spinning]).
    if (backoff.spinning()) {
      backoff.pause();
    } else {
      // Every poll past the spin reads the clock, so a rank notices its timeout within a
      // millisecond, and of two ranks stuck on one fault the one that began waiting first reports
      // first.
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        // Sockets only, bounded by the inspector's budget: comm_ may be broken now.
        StallReport report = summarize_stall(entry.fingerprint.sequence_number, entry.fingerprint.str(),
                                             lifecycle_.inspector().query_peers());
        const char* advice = report.not_arrived.empty()
                                 ? "a rank may have called a different collective, or the transport is stuck"
                                 : "a rank that does not arrive may have skipped this collective, called a "
                                   "different one, stalled, or died";
        std::string message = detail::str_cat(
            phase, " timed out after ", entry.timeout.count(), " ms (the group's watchdog timeout): ",
            report.summary, " -- ", advice, ". The group ", group_name(),
            " is now unusable; later collectives on it fail immediately");
        throw TimeoutError(std::move(message), std::move(report));
      }
      backoff.pause(now);
    }
  }
}

// Note [Queued, waiting, moving]: a DDP bucket's span (Reducer, lane 1) runs from its launch to its
// reduction; this span (lane 3) from the moment the worker started the collective to its end. On
// one clock (scripts/merge_traces.py), launch -> start is time queued behind earlier collectives,
// start -> the last rank's start is waiting for the peers (a blocking allreduce cannot finish
// before every rank has joined it), and the rest is moving and reducing the data.
void ProcessGroupMPI::trace_run(const Entry& entry, double started_us) const {
  const auto op = static_cast<OpType>(entry.fingerprint.op);
  const uint64_t seq = entry.fingerprint.sequence_number;
  Trace::get().span(
      detail::str_cat(op_type_name(op), " #", seq, entry.trace_label.empty() ? "" : " ", entry.trace_label, " (MPI)"),
      "mpi", started_us, Trace::now_us() - started_us, 3,
      detail::str_cat("{\"sequence_number\":", seq, ",\"label\":\"", entry.trace_label,
                      "\",\"bytes\":", entry.payload_bytes, "}"));
}

void ProcessGroupMPI::move_data(Entry& entry) {
  std::vector<MPI_Request> requests;
  if (entry.inputs_ready) entry.inputs_ready->synchronize();
  const double started_us = Trace::now_us();
  {
    EMBER_MPI_PROGRESS_GUARD;  // Note [Open MPI's progress under ThreadSanitizer]
    entry.start(requests);
  }
  wait_requests(requests, entry, op_type_name(static_cast<OpType>(entry.fingerprint.op)));
  if (entry.finish) entry.finish();
  if (Trace::get().enabled()) trace_run(entry, started_us);
}

std::exception_ptr ProcessGroupMPI::timed_out(const Entry& entry, const char* what, StallReport report) {
  std::string why = detail::str_cat(entry.fingerprint.str(), " timed out after ", entry.timeout.count(), " ms");
  if (!report.not_arrived.empty()) why += detail::str_cat(" (", rank_list(report.not_arrived), " did not arrive)");
  lifecycle_.break_group(std::move(why), std::move(report));
  g_a_group_timed_out.store(true);
  return std::make_exception_ptr(Error(describe(entry) + ": " + what));
}

void ProcessGroupMPI::run_entry(std::unique_ptr<Entry> entry) {
  // Execution order, the same on every rank (Note [Collectives issued from callbacks run inline]).
  const uint64_t seq = lifecycle_.next_sequence_number();
  entry->fingerprint.sequence_number = seq;
  entry->work->set_sequence_number(seq);
  std::exception_ptr error;
  bool timed_out_here = false;
  try {
    lifecycle_.enter(seq, entry->fingerprint.str());
    move_data(*entry);
  } catch (const TimeoutError& e) {
    timed_out_here = true;
    error = timed_out(*entry, e.what(), e.report);
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(Error(describe(*entry) + ": " + e.what()));
  }
  if (error && debug_level() >= DebugLevel::kInfo) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[ember.distributed] %s\n", e.what());
    }
  }
  lifecycle_.finish(seq, !error);
  WorkPtr work = entry->work;
  if (timed_out_here) abandoned_.push_back(std::move(entry));
  try {
    work->finish(error);
  } catch (const std::exception& e) {
    // A callback added with add_callback threw (the others still ran: Note [Callbacks run on the
    // worker]); then() callbacks never get here.
    std::fprintf(stderr, "[ember.distributed] a Future callback threw on the worker: %s\n", e.what());
  }
}

// ---- sub-groups ----------------------------------------------------------------------------------

ProcessGroupPtr ProcessGroupMPI::run_new_subgroup(const std::vector<int>& ranks, Options options) {
  EMBER_CHECK(!ranks.empty(), "new_group: empty rank list");
  for (size_t i = 0; i < ranks.size(); ++i) {
    EMBER_CHECK(ranks[i] >= 0 && ranks[i] < size_, "new_group: rank ", ranks[i],
                " out of range for a group of size ", size_);
    EMBER_CHECK(i == 0 || ranks[i] > ranks[i - 1], "new_group: ranks must be sorted and unique");
  }
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  const int color = it == ranks.end() ? MPI_UNDEFINED : 0;
  const int key = static_cast<int>(it - ranks.begin());
  auto new_comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  // Split on the worker, in queue order, because it is collective over comm_ like any other call.
  // MPI has no nonblocking split, so a watched barrier goes first: once every rank has passed it,
  // the split's own exchange cannot hang on a rank that never called new_group.
  barrier()->wait();
  WorkPtr work = enqueue(OpType::kUnknown, {}, {}, kUnsetTimeout, -1, -1, false,
                         [this, color, key, new_comm](std::vector<MPI_Request>&) {
                           EMBER_MPI_CALL(MPI_Comm_split(comm_, color, key, new_comm.get()));
                         });
  work->wait();
  if (*new_comm == MPI_COMM_NULL) return nullptr;
  if (!options.has_debug_level) {
    options.has_debug_level = options_.has_debug_level;
    options.debug_level = options_.debug_level;
  }
  return std::make_shared<ProcessGroupMPI>(*new_comm, std::move(options));
}

}  // namespace ember::distributed
