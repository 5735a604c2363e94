// The CUDA simulator's kernel launches: every block of the grid in turn, on the worker thread of
// the launch's stream (streams.cc), with the threads of a block as fibers (Boost.Context) that
// switch at __syncthreads and warp intrinsics.
#include <boost/context/fiber.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sim/cuda/checks.h"
#include "sim/cuda/state.h"

// Note [CUDA simulator scheduling]
// A block's threads run as fibers on one host thread, in thread order, each until it finishes or
// reaches a barrier (__syncthreads) or a warp intrinsic (shuffle, ballot, __syncwarp). When every
// live thread waits, the scheduler releases whoever may go on: all threads of the block at a
// barrier that all of them reached; or a group of lanes of one warp that all reached the same warp
// intrinsic with the same mask, whose results it computes from the values they offered. Anything
// else (a barrier some threads skipped or exited before, a shuffle whose mask names a lane that
// never came) is a divergence the device leaves undefined; the simulator fails the launch with a
// message naming the block, the threads and the primitive.
// A switch between Boost.Context fibers costs nanoseconds (ucontext's swapcontext makes a system
// call and costs tens of times more; docs/measurements.md, "CUDA simulator"), but a fiber per
// thread is still too much for the elementwise kernels that launch millions of threads and never
// synchronise. So thread 0 of each block runs first as a fiber: if it finishes without
// synchronising, no correct kernel has the rest of the block synchronise either, and threads 1..
// run as plain calls on the host stack ("direct" mode), where reaching a barrier or warp intrinsic
// fails the launch as divergent. (This rejects one legal pattern: a warp-uniform
// branch, not taken by warp 0, that contains warp intrinsics. tensor/cuda/README.md says so.)
// Shared memory is one buffer per launch, which all the fibers of the running block see: the
// dynamic shared memory first, then each static declaration (EMBER_SHARED, device_code.h) in the
// order the block's threads first reach it. It is poisoned at every block's start, and checked
// (checks.cc) while the sanitizer is on.

namespace ember::cudasim {
namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridDimYZ = 65535;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // static and dynamic together, as on the device
constexpr size_t kFiberStackBytes = 128 * 1024;
constexpr int kWarpSize = 32;

enum class Wait { kNone, kBarrier, kWarp };
enum class WarpOp { kShuffle, kBallot, kSync };

namespace fibers = boost::context;

struct SimThread {
  fibers::fiber fiber;  // the suspended thread, resumed by the scheduler
  fibers::fiber sink;   // the suspended scheduler, resumed when this thread waits or finishes
  uint3 index{0, 0, 0};
  int linear = 0;
  bool done = false;
  Wait wait = Wait::kNone;
  // The warp intrinsic it waits at: what it offers, which lane it reads, and what it receives.
  WarpOp op = WarpOp::kSync;
  unsigned mask = 0;
  uint64_t offered = 0;
  int source_lane = 0;
  uint64_t received = 0;
};

struct BlockRun {
  const std::function<void()>* body = nullptr;
  int size = 0;
  std::vector<SimThread> threads;
  SimThread* current = nullptr;  // the running fiber; null in direct mode
  bool direct = false;
  int direct_linear = 0;
  std::string failure;
  std::vector<unsigned char> shared;  // kMaxSharedBytes
  std::vector<std::pair<const void*, size_t>> static_shared;  // declaration -> offset
  KernelContext checks;  // also the kernel's name and entry, for messages
};

thread_local BlockRun* g_block = nullptr;

// Fiber stacks, kept for the next block and launch on this host thread (a Boost.Context stack
// allocator over a free list).
std::vector<char*>& free_stacks() {
  static thread_local std::vector<char*> stacks;
  return stacks;
}

struct PooledStack {
  fibers::stack_context allocate() {
    auto& stacks = free_stacks();
    char* base;
    if (stacks.empty()) {
      base = new char[kFiberStackBytes];  // left uninitialised
    } else {
      base = stacks.back();
      stacks.pop_back();
    }
    fibers::stack_context sc;
    sc.size = kFiberStackBytes;
    sc.sp = base + kFiberStackBytes;  // stacks grow down
    return sc;
  }
  void deallocate(fibers::stack_context& sc) noexcept {
    free_stacks().push_back(static_cast<char*>(sc.sp) - kFiberStackBytes);
  }
};

std::string where(const BlockRun& run) {
  return "kernel " + kernel_label(run.checks.kernel_name, run.checks.entry) + " block " + str(blockIdx);
}

// A primitive reached on the host stack (direct mode) or outside any kernel.
struct KernelFault {
  std::string message;
};

BlockRun& running_block(const char* primitive) {
  if (g_block == nullptr) {
    throw KernelFault{std::string(primitive) + " called outside a kernel"};
  }
  if (g_block->direct) {
    throw KernelFault{where(*g_block) + ": thread " + str(threadIdx) + " reached " + primitive +
                      " but thread (0,0,0) finished without any barrier or warp intrinsic: a "
                      "divergent " +
                      primitive};
  }
  return *g_block;
}

// Runs the kernel body as thread `linear`. A fiber abandoned after a failure is unwound by
// Boost.Context's forced_unwind, which is no std::exception and so passes the handlers below.
void start_fiber(BlockRun& run, int linear) {
  SimThread& t = run.threads[linear];
  t = SimThread{};
  t.index = thread_of(linear);
  t.linear = linear;
  t.fiber = fibers::fiber(std::allocator_arg, PooledStack(), [&run, linear](fibers::fiber&& sink) {
    SimThread& self = run.threads[linear];
    self.sink = std::move(sink);
    try {
      (*run.body)();
    } catch (const KernelFault& fault) {
      if (run.failure.empty()) run.failure = fault.message;
    } catch (const std::exception& e) {
      if (run.failure.empty()) run.failure = where(run) + ": threw " + e.what();
    }
    self.done = true;
    return std::move(self.sink);
  });
}

void resume(BlockRun& run, SimThread& t) {
  run.current = &t;
  threadIdx = t.index;
  t.wait = Wait::kNone;
  t.fiber = std::move(t.fiber).resume();
  run.current = nullptr;
}

void wait_in_scheduler(BlockRun& run) {
  SimThread& self = *run.current;
  self.sink = std::move(self.sink).resume();
  threadIdx = self.index;
}

std::string lanes_of(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::kShuffle: return "a warp shuffle";
    case WarpOp::kBallot: return "a warp vote";
    case WarpOp::kSync: return "__syncwarp";
  }
  return "a warp intrinsic";
}

// Releases every group of lanes that completed a warp intrinsic; false when none could go on.
bool release_warps(BlockRun& run) {
  bool released = false;
  for (int warp_start = 0; warp_start < run.size; warp_start += kWarpSize) {
    const int lanes = std::min(kWarpSize, run.size - warp_start);
    unsigned existing = lanes == kWarpSize ? ~0u : (1u << lanes) - 1;
    for (int lane = 0; lane < lanes; ++lane) {
      SimThread& leader = run.threads[warp_start + lane];
      if (leader.wait != Wait::kWarp) continue;
      const unsigned group = leader.mask & existing;
      bool complete = (group >> lane) & 1u;
      for (int l = 0; l < lanes && complete; ++l) {
        if (!((group >> l) & 1u)) continue;
        const SimThread& t = run.threads[warp_start + l];
        complete = t.wait == Wait::kWarp && t.mask == leader.mask && t.op == leader.op;
      }
      if (!complete) continue;
      unsigned ballot = 0;
      for (int l = 0; l < lanes; ++l) {
        if (((group >> l) & 1u) && run.threads[warp_start + l].offered != 0) ballot |= 1u << l;
      }
      for (int l = 0; l < lanes; ++l) {
        if (!((group >> l) & 1u)) continue;
        SimThread& t = run.threads[warp_start + l];
        if (t.op == WarpOp::kShuffle) {
          const int src = t.source_lane;
          if (src < 0 || src >= lanes || !((group >> src) & 1u)) {
            run.failure = where(run) + ": thread " + str(t.index) + " shuffles from lane " +
                          std::to_string(src) + ", which is not in the mask " + lanes_of(t.mask) +
                          " of existing lanes";
            return false;
          }
          t.received = run.threads[warp_start + src].offered;
        } else {
          t.received = ballot;
        }
        t.wait = Wait::kNone;
      }
      checks_on_warp_sync(run.checks, warp_start / kWarpSize, group);
      released = true;
    }
    (void)existing;
  }
  return released;
}

std::string waiting_summary(const BlockRun& run) {
  int at_barrier = 0, at_warp = 0, finished = 0;
  for (const SimThread& t : run.threads) {
    if (t.done)
      ++finished;
    else if (t.wait == Wait::kBarrier)
      ++at_barrier;
    else if (t.wait == Wait::kWarp)
      ++at_warp;
  }
  return std::to_string(at_barrier) + " of " + std::to_string(run.size) +
         " threads wait at __syncthreads, " + std::to_string(at_warp) + " at a warp intrinsic, " +
         std::to_string(finished) + " finished";
}

void run_fibers(BlockRun& run) {
  for (int i = 1; i < run.size; ++i) start_fiber(run, i);
  for (;;) {
    for (SimThread& t : run.threads) {
      if (!t.done && t.wait == Wait::kNone) {
        resume(run, t);
        if (!run.failure.empty()) return;
      }
    }
    int live = 0, at_barrier = 0;
    for (const SimThread& t : run.threads) {
      live += !t.done;
      at_barrier += !t.done && t.wait == Wait::kBarrier;
    }
    if (live == 0) return;
    if (at_barrier == run.size) {
      for (SimThread& t : run.threads) t.wait = Wait::kNone;
      checks_on_barrier(run.checks);
      continue;
    }
    if (release_warps(run)) continue;
    if (!run.failure.empty()) return;
    const SimThread* stuck = nullptr;
    for (const SimThread& t : run.threads) {
      if (!t.done) {
        stuck = &t;
        break;
      }
    }
    run.failure = where(run) + ": divergent " +
                  (stuck->wait == Wait::kBarrier ? std::string("__syncthreads")
                                                : std::string(op_name(stuck->op)) + " (mask " +
                                                      lanes_of(stuck->mask) + ")") +
                  " at thread " + str(stuck->index) + ": " + waiting_summary(run);
    return;
  }
}

void run_block(BlockRun& run) {
  checks_begin_block(run.checks, blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  run.direct = false;
  start_fiber(run, 0);
  resume(run, run.threads[0]);
  if (!run.failure.empty()) return;
  if (run.threads[0].done) {
    run.direct = true;
    for (int i = 1; i < run.size; ++i) {
      run.direct_linear = i;
      threadIdx = thread_of(i);
      (*run.body)();
      if (!run.failure.empty()) return;
    }
    return;
  }
  run_fibers(run);
}

std::string config_error(const LaunchConfig& c) {
  const dim3 b = c.block, g = c.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || g.x == 0 || g.y == 0 || g.z == 0) return "a zero grid or block dimension";
  if (threads > kMaxThreadsPerBlock) {
    return std::to_string(threads) + " threads per block (at most " +
           std::to_string(kMaxThreadsPerBlock) + ")";
  }
  if (b.z > kMaxBlockDimZ) return "blockDim.z > 64";
  if (g.y > kMaxGridDimYZ || g.z > kMaxGridDimYZ) return "gridDim.y or .z > 65535";
  if (g.x > 0x7fffffffu) return "gridDim.x > 2^31 - 1";
  if (c.dynamic_shared_bytes > kMaxSharedBytes) {
    return std::to_string(c.dynamic_shared_bytes) + " bytes of dynamic shared memory (at most " +
           std::to_string(kMaxSharedBytes) + ")";
  }
  return "";
}

}  // namespace

namespace {

// Every block of the grid in turn, on the stream's worker thread; "" or why the launch failed.
std::string run_grid(const char* kernel_name, const LaunchConfig& config,
                     const std::function<void()>& thread_body) {
  DeviceAccess access;
  BlockRun run;
  run.body = &thread_body;
  run.size = static_cast<int>(config.block.x * config.block.y * config.block.z);
  run.threads.resize(run.size);
  run.shared.resize(kMaxSharedBytes);
  run.checks.shared = run.shared.data();
  run.checks.shared_capacity = run.shared.size();
  run.checks.failure = &run.failure;
  checks_begin_launch(run.checks, kernel_name, config.entry, run.size);
  checks_on_shared_layout(run.checks, 0, config.dynamic_shared_bytes);
  gridDim = config.grid;
  blockDim = config.block;
  g_block = &run;
  if (run.checks.checks != 0) g_kernel = &run.checks;
  std::string failure;
  for (unsigned z = 0; z < config.grid.z && failure.empty(); ++z) {
    for (unsigned y = 0; y < config.grid.y && failure.empty(); ++y) {
      for (unsigned x = 0; x < config.grid.x && failure.empty(); ++x) {
        blockIdx = uint3{x, y, z};
        try {
          run_block(run);
        } catch (const KernelFault& fault) {
          run.failure = fault.message;
        } catch (const std::exception& e) {
          run.failure = where(run) + ": threw " + e.what();
        }
        failure = run.failure;
      }
    }
  }
  g_block = nullptr;
  g_kernel = nullptr;
  if (!failure.empty()) std::fprintf(stderr, "cudasim: cudaErrorLaunchFailure: %s\n", failure.c_str());
  return failure;
}

}  // namespace

void run_kernel(const char* kernel_name, const LaunchConfig& config, std::function<void()> thread_body) {
  const std::string bad = config_error(config);
  if (!bad.empty()) {
    fail(cudaErrorInvalidConfiguration,
         std::string("launching ") + kernel_name + ": invalid configuration: " + bad);
    return;
  }
  if (!is_live_stream(config.stream)) {
    fail(cudaErrorInvalidResourceHandle,
         std::string("launching ") + kernel_name + " on a stream that is not live");
    return;
  }
  if (g_block != nullptr) {
    fail(cudaErrorLaunchFailure,
         std::string("launching ") + kernel_name +
             " from inside a kernel (dynamic parallelism) is not simulated");
    return;
  }
  // An earlier launch on this stream that failed is this launch's error, as on a GPU.
  const std::string call = std::string("launching ") + kernel_name;
  if (report_stream_error(call.c_str(), config.stream) != cudaSuccess) return;
  enqueue(config.stream, [kernel_name, config, body = std::move(thread_body)] {
    return run_grid(kernel_name, config, body);
  });
}

void sync_threads() {
  BlockRun& run = running_block("__syncthreads");
  run.current->wait = Wait::kBarrier;
  wait_in_scheduler(run);
}

namespace {
uint64_t warp_op(const char* name, WarpOp op, unsigned mask, uint64_t value, int source_lane) {
  BlockRun& run = running_block(name);
  SimThread& self = *run.current;
  if (!((mask >> (self.linear % kWarpSize)) & 1u)) {
    throw KernelFault{where(run) + ": thread " + str(self.index) + " calls " + name +
                      " with a mask " + lanes_of(mask) + " that leaves out its own lane"};
  }
  self.wait = Wait::kWarp;
  self.op = op;
  self.mask = mask;
  self.offered = value;
  self.source_lane = source_lane;
  wait_in_scheduler(run);
  return self.received;
}
}  // namespace

void sync_warp(unsigned mask) { warp_op("__syncwarp", WarpOp::kSync, mask, 0, 0); }

uint64_t warp_exchange(unsigned mask, uint64_t value, int source_lane) {
  return warp_op("a warp shuffle", WarpOp::kShuffle, mask, value, source_lane);
}

unsigned warp_ballot(unsigned mask, bool predicate) {
  return static_cast<unsigned>(warp_op("a warp vote", WarpOp::kBallot, mask, predicate ? 1 : 0, 0));
}

int lane_id() {
  const BlockRun& run = running_block("a warp intrinsic");
  return run.current->linear % kWarpSize;
}

void* dynamic_shared_memory() {
  if (g_block == nullptr) throw KernelFault{"dynamic shared memory used outside a kernel"};
  return g_block->shared.data();
}

void* static_shared_memory(const void* declaration, size_t bytes, size_t alignment) {
  if (g_block == nullptr) throw KernelFault{"a __shared__ array used outside a kernel"};
  BlockRun& run = *g_block;
  for (const auto& [d, offset] : run.static_shared) {
    if (d == declaration) return run.shared.data() + offset;
  }
  const size_t used = run.checks.shared_used;
  const size_t offset = (used + alignment - 1) / alignment * alignment;
  if (offset + bytes > run.shared.size()) {
    throw KernelFault{where(run) + ": " + std::to_string(offset + bytes) +
                      " bytes of shared memory (static and dynamic), more than the " +
                      std::to_string(run.shared.size()) + " a block may have"};
  }
  run.static_shared.emplace_back(declaration, offset);
  checks_on_shared_layout(run.checks, offset, bytes);
  return run.shared.data() + offset;
}

}  // namespace ember::cudasim
