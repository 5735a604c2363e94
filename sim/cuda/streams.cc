// The CUDA simulator's streams: each runs its work in order on a host thread of its own, apart
// from the other streams and from the host, with events and the legacy default stream ordering
// them as CUDA does (Note [Simulated streams]).
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim/cuda/state.h"

// Note [Simulated streams]
// A stream is a FIFO of work (kernel launches, copies, memsets, cuBLAS calls, simulated NCCL
// collectives, event records and waits) run by one worker thread, so work on two streams, and the
// host, run concurrently and in no fixed order, as on a GPU. What orders them is what orders them
// on a GPU:
// - an event recorded on a stream completes when the stream reaches it; cudaStreamWaitEvent makes a
//   stream wait for the record that was the event's latest when it was called;
// - the legacy default stream (stream 0): work on it waits for all earlier work on every blocking
//   stream, and work on a blocking stream waits for all earlier work on stream 0. Streams created
//   with cudaStreamNonBlocking (all of ember's) do neither;
// - synchronous calls (cudaMemcpy, cudaStreamSynchronize, cudaEventSynchronize,
//   cudaDeviceSynchronize) wait; cudaStreamQuery and cudaEventQuery answer cudaErrorNotReady while
//   work is pending, and, as on a GPU, leave it as the thread's last error.
// A copy between device memory and pageable host memory runs synchronously (after the stream's
// earlier work), as CUDA may; a copy from or to pinned memory runs when its stream reaches it.
// EMBER_CUDASIM_DELAY=seed makes every worker sleep a random 0-2 ms before each piece of work
// (seeded per stream), so a missing wait shows up as a wrong value instead of passing by luck.
// A kernel that fails on a worker (a divergent barrier, a fault) reports its error to the next
// call that synchronises with its stream (or the next launch on it), once: unlike a GPU, where
// the error is sticky for the whole context, later work still runs.

namespace ember::cudasim {
namespace {

unsigned delay_seed() {
  static const unsigned seed = [] {
    const char* env = std::getenv("EMBER_CUDASIM_DELAY");
    return env == nullptr ? 0u : static_cast<unsigned>(std::strtoul(env, nullptr, 10)) + 1u;
  }();
  return seed;
}

}  // namespace

class StreamWorker {
 public:
  StreamWorker(bool blocking, unsigned index) : blocking_(blocking), random_(delay_seed() + index) {
    thread_ = std::thread([this] { run(); });
  }

  bool blocking() const { return blocking_; }

  // Appends `work`; returns its ticket (work with ticket t has run once completed() >= t).
  uint64_t enqueue(StreamWork work) {
    uint64_t ticket;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
      ticket = ++enqueued_;
    }
    wake_.notify_one();
    return ticket;
  }

  uint64_t enqueued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return enqueued_;
  }

  bool reached(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ >= ticket;
  }

  void wait_for(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_ >= ticket; });
  }

  // The first error a piece of work reported since the last call, once.
  std::string take_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string e;
    e.swap(error_);
    return e;
  }

  // Runs what is queued, then ends the worker thread.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    for (;;) {
      StreamWork work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      if (delay_seed() != 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(random_() % 2000));
      }
      std::string error = work();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.empty()) error_ = std::move(error);
        ++completed_;
      }
      done_.notify_all();
    }
  }

  const bool blocking_;
  std::minstd_rand random_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<StreamWork> queue_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::string error_;
  std::thread thread_;
};

namespace {

struct Streams {
  std::mutex mutex;
  std::set<StreamWorker*> blocking;  // live blocking streams, stream 0 excluded
  std::set<StreamWorker*> all;       // every live stream, stream 0 included
  // Destroyed streams' workers, stopped but kept: work on another stream may still wait for a
  // ticket of theirs.
  std::vector<StreamWorker*> retired;
  unsigned created = 0;
};

Streams& streams() {
  static Streams* s = new Streams;  // workers outlive static destructors that still synchronise
  return *s;
}

StreamWorker* legacy_stream() {
  static StreamWorker* w = [] {
    auto* worker = new StreamWorker(true, 0);
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.all.insert(worker);
    return worker;
  }();
  return w;
}

// The ticket of every blocking stream's latest work, for stream 0 to wait on.
std::vector<std::pair<StreamWorker*, uint64_t>> blocking_frontier() {
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<std::pair<StreamWorker*, uint64_t>> out;
  for (StreamWorker* w : s.blocking) out.emplace_back(w, w->enqueued());
  return out;
}

}  // namespace

StreamWorker* stream_worker(cudaStream_t stream) {
  return stream == nullptr ? legacy_stream() : stream->worker;
}

StreamWorker* create_stream_worker(bool blocking) {
  Streams& s = streams();
  unsigned index;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    index = ++s.created;
  }
  auto* w = new StreamWorker(blocking, index);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.all.insert(w);
  if (blocking) s.blocking.insert(w);
  return w;
}

void destroy_stream_worker(StreamWorker* worker) {
  Streams& s = streams();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.all.erase(worker);
    s.blocking.erase(worker);
  }
  worker->stop();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.retired.push_back(worker);
}

uint64_t enqueue(cudaStream_t stream, StreamWork work) {
  StreamWorker* worker = stream_worker(stream);
  if (stream == nullptr) {
    // Legacy semantics: first every blocking stream's earlier work.
    auto frontier = blocking_frontier();
    if (!frontier.empty()) {
      worker->enqueue([frontier] {
        for (const auto& [w, ticket] : frontier) w->wait_for(ticket);
        return std::string();
      });
    }
  } else if (worker->blocking()) {
    StreamWorker* legacy = legacy_stream();
    const uint64_t ticket = legacy->enqueued();
    if (ticket > 0) {
      worker->enqueue([legacy, ticket] {
        legacy->wait_for(ticket);
        return std::string();
      });
    }
  }
  return worker->enqueue(std::move(work));
}

void enqueue_host_work(cudaStream_t stream, std::function<std::string()> work) {
  enqueue(stream, std::move(work));
}

cudaError_t synchronize_stream(const char* call, cudaStream_t stream) {
  StreamWorker* worker = stream_worker(stream);
  // Stream 0 also waits for the blocking streams (its own marker does that).
  const uint64_t ticket = enqueue(stream, [] { return std::string(); });
  worker->wait_for(ticket);
  return report_stream_error(call, stream);
}

cudaError_t report_stream_error(const char* call, cudaStream_t stream) {
  const std::string error = stream_worker(stream)->take_error();
  if (error.empty()) return cudaSuccess;
  return fail(cudaErrorLaunchFailure, std::string(call) + ": earlier work on the stream failed: " + error);
}

bool stream_idle(cudaStream_t stream) {
  StreamWorker* worker = stream_worker(stream);
  return worker->reached(worker->enqueued());
}

cudaError_t synchronize_device(const char* call) {
  std::vector<StreamWorker*> all;
  {
    Streams& s = streams();
    legacy_stream();
    std::lock_guard<std::mutex> lock(s.mutex);
    all.assign(s.all.begin(), s.all.end());
  }
  std::string error;
  for (StreamWorker* w : all) {
    w->wait_for(w->enqueued());
    std::string e = w->take_error();
    if (error.empty()) error = std::move(e);
  }
  if (error.empty()) return cudaSuccess;
  return fail(cudaErrorLaunchFailure, std::string(call) + ": earlier work failed: " + error);
}

void wait_for_ticket(StreamWorker* worker, uint64_t ticket) { worker->wait_for(ticket); }

bool ticket_reached(StreamWorker* worker, uint64_t ticket) { return worker->reached(ticket); }

}  // namespace ember::cudasim
