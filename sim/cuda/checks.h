// The CUDA simulator's sanitizer (Note [Simulated compute-sanitizer], checks.cc): what the
// scheduler, the runtime and the device arena tell it, and the state of the running block that the
// access hooks (access_hooks.cc) check each load and store against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace ember::cudasim {

// The checks EMBER_CUDASIM_CHECKS selects: a comma-separated list of memcheck, initcheck and
// racecheck, "all" (the default) or "none".
enum CheckBits : unsigned {
  kMemcheck = 1u << 0,
  kInitcheck = 1u << 1,
  kRacecheck = 1u << 2,
};
unsigned enabled_checks();

// --- The device arena's shadow: per byte, whether it is addressable and whether it was written.
// Called by device_memory.cc when it reserves the arena.
void shadow_reserve(char* arena, size_t bytes);
// cudaMalloc / cudaFree: `requested` bytes addressable and unwritten, the rounding after it not.
void shadow_on_malloc(void* ptr, size_t requested, size_t rounded);
void shadow_on_free(void* ptr, size_t rounded);
// A copy, memset, cuBLAS call or collective wrote [ptr, ptr + bytes); a device-to-device copy
// carries what its source had.
void shadow_on_write(void* ptr, size_t bytes);
void shadow_on_device_copy(void* dst, const void* src, size_t bytes);
// "" when every byte of [ptr, ptr + bytes) was written, else a sentence saying which was not
// (initcheck of what a cuBLAS call reads; "" when initcheck is off).
std::string shadow_unwritten(const void* ptr, size_t bytes);

// --- The running block, set by the scheduler for every block it runs on this host thread.
// One shared-memory byte's last write and last read in the current barrier interval.
struct SharedAccess {
  uint32_t interval = 0;     // the block's barrier interval it belongs to (0: none)
  uint16_t thread = 0;       // linear thread index in the block
  uint16_t warp_syncs = 0;   // how many warp syncs of its warp preceded it in the interval
  const void* pc = nullptr;  // the instruction, for its source line
};
struct SharedShadow {
  uint8_t state = 0;  // kAddressable | kWritten
  bool several_readers = false;
  SharedAccess write, read;
};

struct KernelContext {
  const char* kernel_name = "";
  const void* entry = nullptr;
  unsigned checks = 0;
  uint32_t launch = 0;           // unique per launch, for the global race shadow
  uint32_t block_linear = 0;
  int block_size = 0;
  uint32_t interval = 0;         // barrier intervals so far on this host thread: never 0
  uint16_t barriers = 0;         // __syncthreads passed in this block
  std::string* failure = nullptr;  // the block's failure; the first report lands there
  // The block's shared memory: dynamic first, then each static declaration (static_shared_memory).
  unsigned char* shared = nullptr;
  size_t shared_capacity = 0;
  size_t shared_used = 0;
  std::vector<SharedShadow> shared_shadow;
  // Per warp, the lane masks of the warp syncs (__syncwarp, shuffles, votes) in this interval.
  std::vector<std::vector<unsigned>> warp_syncs;
};

// The block running on this host thread while checks are on; null otherwise (the hooks return).
extern EMBER_CUDASIM_TLS KernelContext* g_kernel;

// Sets up `k` for a launch of `block_size` threads with `shared_capacity` bytes of shared memory.
void checks_begin_launch(KernelContext& k, const char* kernel_name, const void* entry, int block_size);
// At each block's start: shared memory poisoned (0xff) and unwritten, race records forgotten.
void checks_begin_block(KernelContext& k, uint32_t block_linear);
void checks_on_barrier(KernelContext& k);
void checks_on_warp_sync(KernelContext& k, int warp, unsigned lanes);
// A static __shared__ declaration took [offset, offset + bytes) of the block's shared memory.
void checks_on_shared_layout(KernelContext& k, size_t offset, size_t bytes);

// Called by the access hooks for an access inside the arena or the block's shared memory.
void check_global_access(KernelContext& k, uintptr_t address, size_t bytes, bool write,
                         const void* pc);
void check_shared_access(KernelContext& k, uintptr_t address, size_t bytes, bool write,
                         const void* pc);
void check_atomic_access(KernelContext& k, uintptr_t address, size_t bytes, const void* pc);

// --- Shared by the checks (checks.cc) and the race checks (race_check.cc).
// racecheck's shadow: records per 4-byte granule of the arena.
void race_shadow_reserve(size_t arena_bytes);
void check_global_race(KernelContext& k, uintptr_t address, size_t bytes, bool write, const void* pc);
// A shared-memory hazard at `byte` (reported, true) or the access recorded (false).
bool check_shared_race(KernelContext& k, SharedShadow& sh, size_t byte, bool write, const void* pc);
// Zero-filled address space that is paid for only where it is touched.
void* reserve_shadow(size_t bytes);
// The launch's failure becomes `what`, prefixed with the kernel, unless a report came first.
void report(KernelContext& k, const std::string& what);
// "thread (x,y,z) of block (x,y,z) (file.cu:line in function)".
std::string accessor(const KernelContext& k, int thread, const void* pc);
// Where `address` lies: inside an allocation (live or freed), past the end of one, or between two.
std::string describe_address(uintptr_t address);
std::string hex(uintptr_t v);
std::string str(uint3 v);
uint3 thread_of(int linear);     // in the running block
uint3 block_of(uint32_t linear); // in the running grid
int current_thread();            // the running thread's linear index in its block

// The arena's extent, for the hooks' first test.
extern uintptr_t g_shadow_arena_begin;
extern size_t g_shadow_arena_bytes;

// "file.cu:line in function" for an instruction address in the kernel code, or its raw address.
std::string source_line(const void* pc);
// The kernel's full name (template arguments included) from its entry address, else `spelled`.
std::string kernel_label(const char* spelled, const void* entry);

}  // namespace ember::cudasim
