// The CUDA simulator's racecheck (Note [Simulated compute-sanitizer], checks.cc): hazards between
// the threads of a block within a barrier interval in shared memory, and between any two threads
// of a launch in global memory.
#include <algorithm>
#include <cstdint>
#include <string>

#include "sim/cuda/checks.h"

namespace ember::cudasim {
namespace {

// One 4-byte granule of global memory: its last write and read in a launch, each as the thread
// (1 + its number in the launch; 0: none), the bytes of the granule it touched, and how many
// barriers its block had passed. kSeveralReaders marks bytes that unordered threads all read.
// Sub-word accesses by two threads to different bytes of one granule keep only the latest's
// record: a race among such accesses may go unreported, never one reported falsely.
constexpr uintptr_t kGranule = 4;
struct GlobalRace {
  uint32_t launch;
  uint32_t writer;
  uint32_t reader;
  uint16_t writer_barriers;
  uint16_t reader_barriers;
  uint8_t writer_bytes;
  uint8_t reader_bytes;
};
constexpr uint8_t kSeveralReaders = 0x10;
constexpr uint8_t kGranuleBytes = 0x0f;

GlobalRace* g_race = nullptr;

uint32_t launch_number(const KernelContext& k) {
  return k.block_linear * static_cast<uint32_t>(k.block_size) + static_cast<uint32_t>(current_thread()) + 1;
}

// Whether the access by `who` (1 + its number) after `barriers` of its block is ordered before the
// current thread's: the same thread, or the same block with a barrier between (the record is
// from earlier, so a different count is a smaller one).
bool ordered(const KernelContext& k, uint32_t who, uint16_t barriers, uint32_t me) {
  if (who == me) return true;
  const uint32_t block = (who - 1) / static_cast<uint32_t>(k.block_size);
  return block == k.block_linear && barriers != k.barriers;
}

std::string launch_thread(const KernelContext& k, uint32_t who) {
  const uint32_t n = who - 1, bs = static_cast<uint32_t>(k.block_size);
  return "thread " + str(thread_of(static_cast<int>(n % bs))) + " of block " + str(block_of(n / bs));
}

int first_byte(uint8_t bytes) { return __builtin_ctz(bytes); }

// Whether a warp sync that took in both lanes came between `earlier` and the current access.
bool warp_synced(const KernelContext& k, const SharedAccess& earlier, int me) {
  const int warp = me / 32;
  if (earlier.thread / 32 != warp) return false;
  const unsigned both = (1u << (earlier.thread % 32)) | (1u << (me % 32));
  const auto& syncs = k.warp_syncs[warp];
  for (size_t s = earlier.warp_syncs; s < syncs.size(); ++s) {
    if ((syncs[s] & both) == both) return true;
  }
  return false;
}

bool shared_ordered(const KernelContext& k, const SharedAccess& earlier, int me) {
  return earlier.interval != k.interval || earlier.thread == me || warp_synced(k, earlier, me);
}

}  // namespace

void race_shadow_reserve(size_t arena_bytes) {
  g_race = static_cast<GlobalRace*>(reserve_shadow(arena_bytes / kGranule * sizeof(GlobalRace)));
}

void check_global_race(KernelContext& k, uintptr_t address, size_t bytes, bool write, const void* pc) {
  const uint32_t me = launch_number(k);
  const uintptr_t end = address + bytes;
  for (uintptr_t g = address & ~(kGranule - 1); g < end; g += kGranule) {
    const unsigned lo = static_cast<unsigned>(std::max(address, g) - g);
    const unsigned hi = static_cast<unsigned>(std::min(end, g + kGranule) - g);
    const uint8_t mask = static_cast<uint8_t>(((1u << hi) - 1) & ~((1u << lo) - 1));
    GlobalRace& r = g_race[(g - g_shadow_arena_begin) / kGranule];
    if (r.launch != k.launch) {
      r = GlobalRace{k.launch, 0, 0, 0, 0, 0, 0};
    }
    const uint8_t read_mask = r.reader_bytes & kGranuleBytes;
    const char* hazard = nullptr;
    uint32_t other = 0;
    uint8_t overlap = 0;
    bool by_writer = false;
    if (r.writer != 0 && (r.writer_bytes & mask) && !ordered(k, r.writer, r.writer_barriers, me)) {
      hazard = write ? "write-after-write" : "read-after-write";
      other = r.writer;
      overlap = r.writer_bytes & mask;
      by_writer = true;
    } else if (write && r.reader != 0 && (read_mask & mask) &&
               (r.reader == me ? (r.reader_bytes & kSeveralReaders) != 0
                               : !ordered(k, r.reader, r.reader_barriers, me))) {
      hazard = "write-after-read";
      other = r.reader;
      overlap = read_mask & mask;
    }
    if (hazard != nullptr) {
      const uintptr_t at = g + static_cast<uintptr_t>(first_byte(overlap));
      const std::string by = other == me ? std::string("other threads") : launch_thread(k, other);
      report(k, "racecheck: __global__ " + std::string(hazard) + " hazard at " + hex(at) + " (" +
                    describe_address(at) + "): " + by + (by_writer ? " writes" : " reads") +
                    " it and " + accessor(k, current_thread(), pc) + (write ? " writes" : " reads") +
                    " it in the same launch, with no __syncthreads between");
      return;
    }
    if (write) {
      r.writer_bytes = r.writer == me ? static_cast<uint8_t>(r.writer_bytes | mask) : mask;
      r.writer = me;
      r.writer_barriers = k.barriers;
      if ((read_mask & ~mask) == 0) r.reader = 0, r.reader_bytes = 0;
    } else if (r.reader == me) {
      r.reader_bytes |= mask;
    } else if (r.reader == 0 || ordered(k, r.reader, r.reader_barriers, me) || !(read_mask & mask)) {
      r.reader = me;
      r.reader_bytes = mask;
      r.reader_barriers = k.barriers;
    } else {
      r.reader_bytes |= kSeveralReaders;
    }
  }
}

bool check_shared_race(KernelContext& k, SharedShadow& sh, size_t byte, bool write, const void* pc) {
  const int me = current_thread();
  const SharedAccess* other = nullptr;
  const char* hazard = nullptr;
  if (sh.write.interval != 0 && !shared_ordered(k, sh.write, me)) {
    other = &sh.write;
    hazard = write ? "write-after-write" : "read-after-write";
  } else if (write && sh.read.interval == k.interval &&
             (sh.read.thread == me ? sh.several_readers : !warp_synced(k, sh.read, me))) {
    other = &sh.read;
    hazard = "write-after-read";
  }
  if (hazard != nullptr) {
    report(k, "racecheck: __shared__ " + std::string(hazard) + " hazard at byte " +
                  std::to_string(byte) + " of shared memory: " +
                  accessor(k, other->thread, other->pc) + (other == &sh.write ? " writes" : " reads") +
                  (sh.several_readers && other == &sh.read ? " it (and other threads do)" : " it") +
                  ", then " + accessor(k, me, pc) + (write ? " writes" : " reads") +
                  " it with no __syncthreads (or __syncwarp taking in both) between");
    return true;
  }
  const SharedAccess now{k.interval, static_cast<uint16_t>(me),
                         static_cast<uint16_t>(k.warp_syncs[static_cast<size_t>(me / 32)].size()), pc};
  if (write) {
    sh.write = now;
    sh.several_readers = false;
    sh.read = SharedAccess{};
  } else if (sh.read.interval != k.interval) {
    sh.read = now;
    sh.several_readers = false;
  } else if (sh.read.thread != me) {
    if (warp_synced(k, sh.read, me)) {
      sh.read = now;
    } else {
      sh.several_readers = true;
    }
  }
  return false;
}

}  // namespace ember::cudasim
