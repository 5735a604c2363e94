// The CUDA simulator's device memory: one arena of host address space that host code may not touch
// (Note [Simulated device memory is not host memory]).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "sim/cuda/checks.h"
#include "sim/cuda/state.h"

// Note [Simulated device memory is not host memory]
// On a GPU, host code that dereferences a device pointer faults; the simulator's device memory is
// host memory, so such a bug passed CI and crashed on the first real GPU (PowerSGD's Gram-Schmidt
// read its P and Q matrices from the host). So every cudaMalloc allocation comes from one arena
// that stays PROT_NONE except while the simulator itself works on device memory: a kernel launch,
// cudaMemcpy / cudaMemset, a cuBLAS call, a simulated NCCL collective -- each inside a DeviceAccess
// scope. Host code that touches the arena in between gets SIGSEGV, and the handler below names the
// address before the process dies. Protection is per process: while a scope is open on one host
// thread the arena is open to all of them, so a stray access racing a launch on another thread is
// not caught (most are: the simulator runs every launch to completion before returning).
// With the sanitizer on (checks.cc), kGuardBytes of unallocated, accessible arena lie before the
// first allocation and after the last, so a kernel's access just outside every allocation is
// reported by memcheck instead of faulting.

namespace ember::cudasim {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kGuardBytes = 64 * 1024;

size_t guard_bytes() { return enabled_checks() != 0 ? kGuardBytes : 0; }

struct Arena {
  std::mutex mutex;
  char* base = nullptr;
  size_t reserved = 0;    // bytes of address space, PROT_NONE unless opened
  size_t end = 0;         // nothing at or past this offset is allocated
  size_t managed = 0;     // [base, base + managed): pages whose protection the scopes switch
  int open_scopes = 0;    // DeviceAccess scopes alive, on any host thread
  std::map<size_t, size_t> free_ranges;  // offset -> bytes, all below `end`, coalesced
};

Arena& arena() {
  static Arena* a = new Arena;  // outlives static destructors that free device memory
  return *a;
}

// Read by the signal handler, which may not lock.
std::atomic<uintptr_t> g_arena_begin{0};
std::atomic<uintptr_t> g_arena_end{0};
struct sigaction g_previous_segv;

void write_stderr(const char* s) {
  ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void on_segv(int, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (addr >= g_arena_begin.load() && addr < g_arena_end.load()) {
    char hex[19] = "0x";
    for (int i = 0; i < 16; ++i) hex[2 + i] = "0123456789abcdef"[(addr >> (60 - 4 * i)) & 0xf];
    hex[18] = '\0';
    write_stderr("cudasim: host code touched device memory at ");
    write_stderr(hex);
    write_stderr(" outside a kernel, copy or collective. On a GPU this faults: copy the data to the "
                 "host first (Tensor::cpu(), cudaMemcpy) or do the work in a kernel.\n");
  }
  // The faulting access runs again under the previous handler (the default: the process dies).
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

void set_protection(Arena& a, size_t from, size_t to, int prot) {
  if (to <= from) return;
  if (mprotect(a.base + from, to - from, prot) != 0) {
    std::perror("cudasim: mprotect of the device arena");
    std::abort();
  }
}

int current_protection(const Arena& a) { return a.open_scopes > 0 ? PROT_READ | PROT_WRITE : PROT_NONE; }

// Twice the simulated capacity, so rounding and fragmentation rarely refuse what the capacity allows.
bool reserve(Arena& a, size_t capacity) {
  const size_t bytes = (2 * capacity + kPage - 1) / kPage * kPage;
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  a.base = static_cast<char*>(p);
  a.reserved = bytes;
  a.end = guard_bytes();
  shadow_reserve(a.base, bytes);
  g_arena_begin = reinterpret_cast<uintptr_t>(p);
  g_arena_end = reinterpret_cast<uintptr_t>(p) + bytes;
  struct sigaction action {};
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous_segv);
  return true;
}

}  // namespace

void* device_allocate(size_t bytes, size_t capacity) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (a.base == nullptr && !reserve(a, capacity)) return nullptr;
  for (auto it = a.free_ranges.begin(); it != a.free_ranges.end(); ++it) {
    if (it->second < bytes) continue;  // first fit
    const size_t offset = it->first, left = it->second - bytes;
    a.free_ranges.erase(it);
    if (left > 0) a.free_ranges[offset + bytes] = left;
    return a.base + offset;
  }
  if (bytes > a.reserved - a.end) return nullptr;
  const size_t offset = a.end;
  a.end += bytes;
  const size_t managed = std::min(a.reserved, (a.end + guard_bytes() + kPage - 1) / kPage * kPage);
  if (managed > a.managed) {
    // New pages start closed; opened now if a scope is open.
    set_protection(a, a.managed, managed, current_protection(a));
    a.managed = managed;
  }
  return a.base + offset;
}

void device_free(void* ptr, size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - a.base);
  auto next = a.free_ranges.lower_bound(offset);
  if (next != a.free_ranges.end() && next->first == offset + bytes) {
    bytes += next->second;
    next = a.free_ranges.erase(next);
  }
  if (next != a.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      bytes += prev->second;
      a.free_ranges.erase(prev);
    }
  }
  if (offset + bytes == a.end) {
    a.end = offset;  // the top of the arena: bump back down
  } else {
    a.free_ranges[offset] = bytes;
  }
}

DeviceAccess::DeviceAccess() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (a.open_scopes++ == 0) set_protection(a, 0, a.managed, PROT_READ | PROT_WRITE);
}

DeviceAccess::~DeviceAccess() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (--a.open_scopes == 0) set_protection(a, 0, a.managed, PROT_NONE);
}

}  // namespace ember::cudasim
