// The CUDA simulator's sanitizer: memcheck, initcheck and racecheck over every load and store a
// kernel makes (Note [Simulated compute-sanitizer]).
#include "sim/cuda/checks.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "sim/cuda/state.h"

// Note [Simulated compute-sanitizer]
// The kernels' .cu sources are compiled for the simulator with GCC's ThreadSanitizer
// instrumentation (-fsanitize=thread, as the Linux kernel's KCSAN uses it) but linked without
// TSan's runtime: every load and store calls one of the __tsan_* hooks in access_hooks.cc, which
// pass accesses inside the device arena or the running block's shared memory to the checks here.
// The checks, chosen by EMBER_CUDASIM_CHECKS (default all), are compute-sanitizer's:
// - memcheck: every arena byte has a shadow byte saying whether it lies inside a live allocation's
//   requested extent. cudaMalloc sets it; the caching allocator narrows it to each tensor's bytes
//   when it hands out a block and clears it when the block comes back (annotate_suballocation, in
//   stream order), so a write one past a tensor's end, or a read of a block another stream still
//   uses after it was freed, is an invalid access, though both land in mapped memory. Shared
//   memory is checked against the extents its declarations took.
// - initcheck: the shadow also says whether the byte was written since it was allocated (by a
//   kernel, copy, memset, cuBLAS call or collective); a kernel or cuBLAS read of an unwritten
//   byte is reported. Shared memory starts every block poisoned (0xff) and unwritten.
// - racecheck: within one barrier interval of a block, a shared-memory byte written by one
//   thread and read or written by another is a hazard, unless a warp sync (__syncwarp, a shuffle
//   or vote) taking in both threads came between. Global memory is checked within one launch:
//   two threads of different blocks, or of one block in the same barrier interval, that touch a
//   byte, one of them writing. Atomics are never hazards.
// The first report fails the launch (its stream's next synchronising call returns
// cudaErrorLaunchFailure) with the kernel, block, thread, address, allocation and source line;
// the kernel's threads still run to their end (a hook cannot stop the store it precedes, and
// throwing through instrumented frames is not safe), and later accesses are not reported.

namespace ember::cudasim {

EMBER_CUDASIM_TLS KernelContext* g_kernel = nullptr;
uintptr_t g_shadow_arena_begin = 0;
size_t g_shadow_arena_bytes = 0;

namespace {

constexpr uint8_t kAddressable = 1;
constexpr uint8_t kWritten = 2;

uint8_t* g_shadow = nullptr;
std::atomic<uint32_t> g_next_launch{1};

// What reports name: every allocation, its requested bytes and whether it is live.
struct Extent {
  size_t requested;
  size_t block;
  bool live;
};
std::mutex g_extents_mutex;
std::map<uintptr_t, Extent>& extents() {
  static auto* e = new std::map<uintptr_t, Extent>;
  return *e;
}

uint8_t* shadow_of(const void* p) {
  return g_shadow + (reinterpret_cast<uintptr_t>(p) - g_shadow_arena_begin);
}

void set_state(const void* p, size_t bytes, uint8_t state) {
  if (g_shadow != nullptr && bytes > 0) std::memset(shadow_of(p), state, bytes);
}

// Whether every shadow byte of an access has `bit`; a 4- or 8-byte access is one word test.
bool all_have(const uint8_t* s, size_t bytes, uint8_t bit) {
  if (bytes == 4) {
    uint32_t w;
    std::memcpy(&w, s, 4);
    return (w & (0x01010101u * bit)) == 0x01010101u * bit;
  }
  if (bytes == 8) {
    uint64_t w;
    std::memcpy(&w, s, 8);
    return (w & (0x0101010101010101ull * bit)) == 0x0101010101010101ull * bit;
  }
  for (size_t i = 0; i < bytes; ++i) {
    if (!(s[i] & bit)) return false;
  }
  return true;
}

void set_written(uint8_t* s, size_t bytes) {
  if (bytes == 4) {
    uint32_t w;
    std::memcpy(&w, s, 4);
    w |= 0x01010101u * kWritten;
    std::memcpy(s, &w, 4);
    return;
  }
  for (size_t i = 0; i < bytes; ++i) s[i] |= kWritten;
}

}  // namespace

void* reserve_shadow(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    std::perror("cudasim: mmap of the sanitizer's shadow");
    std::abort();
  }
  return p;
}

std::string hex(uintptr_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%zx", static_cast<size_t>(v));
  return buf;
}

std::string str(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

uint3 thread_of(int linear) {
  return uint3{static_cast<unsigned>(linear % blockDim.x),
               static_cast<unsigned>(linear / blockDim.x % blockDim.y),
               static_cast<unsigned>(linear / (blockDim.x * blockDim.y))};
}

uint3 block_of(uint32_t linear) {
  return uint3{linear % gridDim.x, linear / gridDim.x % gridDim.y, linear / (gridDim.x * gridDim.y)};
}

int current_thread() {
  return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

// Where `address` lies relative to the allocations: inside one (and whether it is live), past
// the end of one, or between two.
std::string describe_address(uintptr_t address) {
  std::lock_guard<std::mutex> lock(g_extents_mutex);
  auto& all = extents();
  auto next = all.upper_bound(address);
  std::ostringstream os;
  if (next != all.begin()) {
    const auto& [base, e] = *std::prev(next);
    if (address < base + e.block) {
      if (!e.live) {
        os << "inside the " << e.block << "-byte block at " << hex(base)
           << ", which is free (returned to the caching allocator, or not yet handed out again)";
      } else if (address >= base + e.requested) {
        os << address - (base + e.requested) << " bytes past the end of the " << e.requested
           << "-byte allocation at " << hex(base);
      } else {
        os << "byte " << address - base << " of the " << e.requested << "-byte allocation at "
           << hex(base);
      }
      return os.str();
    }
    os << address - (base + e.requested) << " bytes past the end of the " << e.requested
       << "-byte allocation at " << hex(base);
    if (next != all.end()) os << ", " << next->first - address << " bytes before the one at " << hex(next->first);
    return os.str();
  }
  if (next != all.end()) {
    os << next->first - address << " bytes before the allocation at " << hex(next->first);
    return os.str();
  }
  return "outside every allocation";
}

void report(KernelContext& k, const std::string& what) {
  if (!k.failure->empty()) return;
  *k.failure = "kernel " + kernel_label(k.kernel_name, k.entry) + ": " + what;
}

std::string accessor(const KernelContext& k, int thread, const void* pc) {
  return "thread " + str(thread_of(thread)) + " of block " + str(block_of(k.block_linear)) + " (" +
         source_line(pc) + ")";
}

unsigned enabled_checks() {
  static const unsigned checks = [] {
    const char* env = std::getenv("EMBER_CUDASIM_CHECKS");
    const std::string spec = env == nullptr ? "all" : env;
    if (spec == "all") return kMemcheck | kInitcheck | kRacecheck;
    unsigned bits = 0;
    std::stringstream list(spec);
    std::string item;
    while (std::getline(list, item, ',')) {
      if (item == "memcheck") {
        bits |= kMemcheck;
      } else if (item == "initcheck") {
        bits |= kInitcheck;
      } else if (item == "racecheck") {
        bits |= kRacecheck;
      } else if (item != "none" && !item.empty()) {
        std::fprintf(stderr,
                     "cudasim: EMBER_CUDASIM_CHECKS=%s: unknown check '%s' (expected all, none, or "
                     "a comma-separated list of memcheck, initcheck, racecheck)\n",
                     spec.c_str(), item.c_str());
        std::exit(2);
      }
    }
    return bits;
  }();
  return checks;
}

void shadow_reserve(char* arena, size_t bytes) {
  if (enabled_checks() == 0) return;
  g_shadow = static_cast<uint8_t*>(reserve_shadow(bytes));
  if (enabled_checks() & kRacecheck) race_shadow_reserve(bytes);
  g_shadow_arena_begin = reinterpret_cast<uintptr_t>(arena);
  g_shadow_arena_bytes = bytes;
}

void shadow_on_malloc(void* ptr, size_t requested, size_t rounded) {
  if (g_shadow == nullptr) return;
  set_state(ptr, requested, kAddressable);
  set_state(static_cast<char*>(ptr) + requested, rounded - requested, 0);
  std::lock_guard<std::mutex> lock(g_extents_mutex);
  extents()[reinterpret_cast<uintptr_t>(ptr)] = Extent{requested, rounded, true};
}

// Runs `update` when `stream` reaches it; at once when the stream is gone (destroying it ran what
// it held), as a block may outlive the stream it was allocated on.
void in_stream_order(cudaStream_t stream, StreamWork update) {
  if (is_live_stream(stream)) {
    enqueue(stream, std::move(update));
  } else {
    update();
  }
}

void annotate_suballocation(void* ptr, size_t bytes, cudaStream_t stream) {
  if (g_shadow == nullptr || ptr == nullptr) return;
  in_stream_order(stream, [ptr, bytes] {
    std::lock_guard<std::mutex> lock(g_extents_mutex);
    auto it = extents().find(reinterpret_cast<uintptr_t>(ptr));
    if (it == extents().end() || bytes > it->second.block) {
      return "annotate_suballocation(" + hex(reinterpret_cast<uintptr_t>(ptr)) + ", " +
             std::to_string(bytes) + "): not the start of a cudaMalloc block that large";
    }
    it->second.requested = bytes;
    it->second.live = true;
    set_state(ptr, bytes, kAddressable);
    set_state(static_cast<char*>(ptr) + bytes, it->second.block - bytes, 0);
    return std::string();
  });
}

void annotate_suballocation_free(void* ptr, size_t block_bytes, cudaStream_t stream) {
  if (g_shadow == nullptr || ptr == nullptr) return;
  in_stream_order(stream, [ptr, block_bytes] {
    std::lock_guard<std::mutex> lock(g_extents_mutex);
    auto it = extents().find(reinterpret_cast<uintptr_t>(ptr));
    if (it != extents().end()) it->second.live = false;
    set_state(ptr, block_bytes, 0);
    return std::string();
  });
}

void shadow_on_free(void* ptr, size_t rounded) {
  if (g_shadow == nullptr) return;
  set_state(ptr, rounded, 0);
  std::lock_guard<std::mutex> lock(g_extents_mutex);
  extents().erase(reinterpret_cast<uintptr_t>(ptr));
}

void shadow_on_write(void* ptr, size_t bytes) {
  if (g_shadow != nullptr) set_written(shadow_of(ptr), bytes);
}

void mark_written(void* ptr, size_t bytes) { shadow_on_write(ptr, bytes); }

void shadow_on_device_copy(void* dst, const void* src, size_t bytes) {
  if (g_shadow == nullptr) return;
  uint8_t* d = shadow_of(dst);
  const uint8_t* s = shadow_of(src);
  for (size_t i = 0; i < bytes; ++i) d[i] = static_cast<uint8_t>((d[i] & ~kWritten) | (s[i] & kWritten));
}

std::string shadow_unwritten(const void* ptr, size_t bytes) {
  if (g_shadow == nullptr || !(enabled_checks() & kInitcheck)) return "";
  const uint8_t* s = shadow_of(ptr);
  for (size_t i = 0; i < bytes; ++i) {
    if (!(s[i] & kWritten)) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(ptr) + i;
      return "initcheck: the byte at " + hex(a) + " (" + describe_address(a) + ") was never written";
    }
  }
  return "";
}

void checks_begin_launch(KernelContext& k, const char* kernel_name, const void* entry, int block_size) {
  k.kernel_name = kernel_name;
  k.entry = entry;
  k.checks = enabled_checks();
  k.launch = g_next_launch.fetch_add(1);
  k.block_size = block_size;
  k.shared_used = 0;
  k.shared_shadow.clear();
  k.warp_syncs.assign(static_cast<size_t>((block_size + 31) / 32), {});
}

void checks_begin_block(KernelContext& k, uint32_t block_linear) {
  k.block_linear = block_linear;
  k.barriers = 0;
  // Device shared memory starts undefined; 0xff bytes read as NaN in a float kernel.
  std::memset(k.shared, 0xff, k.shared_used);
  for (size_t i = 0; i < k.shared_used; ++i) k.shared_shadow[i].state &= kAddressable;
  checks_on_barrier(k);
}

void checks_on_barrier(KernelContext& k) {
  if (++k.interval == 0) ++k.interval;  // 0 marks "never accessed"
  ++k.barriers;
  for (auto& syncs : k.warp_syncs) syncs.clear();
}

void checks_on_warp_sync(KernelContext& k, int warp, unsigned lanes) {
  k.warp_syncs[static_cast<size_t>(warp)].push_back(lanes);
}

void checks_on_shared_layout(KernelContext& k, size_t offset, size_t bytes) {
  k.shared_used = std::max(k.shared_used, offset + bytes);
  k.shared_shadow.resize(k.shared_used);
  std::memset(k.shared + offset, 0xff, bytes);  // laid out mid-block: poisoned like the rest
  for (size_t i = offset; i < offset + bytes; ++i) k.shared_shadow[i].state = kAddressable;
}

namespace {

// memcheck of a global access (`access`: "read", "write" or "atomic"): false, reported, when a
// byte of it lies outside every live allocation.
bool memcheck_global(KernelContext& k, const uint8_t* s, uintptr_t address, size_t bytes,
                     const char* access, const void* pc) {
  if (!(k.checks & kMemcheck) || all_have(s, bytes, kAddressable)) return true;
  size_t bad = 0;
  while (s[bad] & kAddressable) ++bad;
  report(k, "memcheck: invalid __global__ " + std::string(access) + " of " + std::to_string(bytes) +
                " bytes at " + hex(address) + " by " + accessor(k, current_thread(), pc) +
                ": the address " + hex(address + bad) + " is " + describe_address(address + bad));
  return false;
}

}  // namespace

void check_global_access(KernelContext& k, uintptr_t address, size_t bytes, bool write,
                         const void* pc) {
  if (!k.failure->empty()) return;
  uint8_t* s = g_shadow + (address - g_shadow_arena_begin);
  if (!memcheck_global(k, s, address, bytes, write ? "write" : "read", pc)) return;
  if (write) {
    set_written(s, bytes);
  } else if ((k.checks & kInitcheck) && !all_have(s, bytes, kWritten)) {
    size_t bad = 0;
    while (s[bad] & kWritten) ++bad;
    report(k, "initcheck: read of " + std::to_string(bytes) + " bytes at " + hex(address) + " by " +
                  accessor(k, current_thread(), pc) + " reads unwritten memory: " +
                  describe_address(address + bad) +
                  " was not written by any kernel, copy, memset or collective since it was allocated");
    return;
  }
  if (k.checks & kRacecheck) check_global_race(k, address, bytes, write, pc);
}

void check_shared_access(KernelContext& k, uintptr_t address, size_t bytes, bool write,
                         const void* pc) {
  if (!k.failure->empty()) return;
  const size_t offset = address - reinterpret_cast<uintptr_t>(k.shared);
  const int me = current_thread();
  for (size_t i = 0; i < bytes; ++i) {
    if (offset + i >= k.shared_shadow.size() || !(k.shared_shadow[offset + i].state & kAddressable)) {
      if (k.checks & kMemcheck) {
        report(k, "memcheck: invalid __shared__ " + std::string(write ? "write" : "read") + " of " +
                      std::to_string(bytes) + " bytes at byte " + std::to_string(offset) +
                      " of shared memory by " + accessor(k, me, pc) + ": the block's declarations use " +
                      std::to_string(k.shared_used) + " bytes, and byte " + std::to_string(offset + i) +
                      " is in none of them");
      }
      return;
    }
  }
  for (size_t i = 0; i < bytes; ++i) {
    SharedShadow& sh = k.shared_shadow[offset + i];
    if (!write && !(sh.state & kWritten) && (k.checks & kInitcheck)) {
      report(k, "initcheck: read of " + std::to_string(bytes) + " bytes of __shared__ memory at byte " +
                    std::to_string(offset) + " by " + accessor(k, me, pc) + ": byte " +
                    std::to_string(offset + i) +
                    " was not written in this block (shared memory starts every block undefined)");
      return;
    }
    if ((k.checks & kRacecheck) && check_shared_race(k, sh, offset + i, write, pc)) return;
    if (write) sh.state |= kWritten;
  }
}

void check_atomic_access(KernelContext& k, uintptr_t address, size_t bytes, const void* pc) {
  if (!k.failure->empty()) return;
  if (address - g_shadow_arena_begin < g_shadow_arena_bytes) {
    uint8_t* s = g_shadow + (address - g_shadow_arena_begin);
    if (memcheck_global(k, s, address, bytes, "atomic", pc)) set_written(s, bytes);
  }
}

}  // namespace ember::cudasim
