// The entry points GCC's -fsanitize=thread instrumentation calls on every load, store and atomic
// of the simulated kernels' code, passing those inside the device arena or the running block's
// shared memory to the simulator's checks (Note [Simulated compute-sanitizer], checks.cc).
// Atomics are performed here, sequentially consistent whatever order the code asked for.
#include <cstddef>
#include <cstdint>

#include "sim/cuda/checks.h"

namespace {

using ember::cudasim::g_kernel;
using ember::cudasim::g_shadow_arena_begin;
using ember::cudasim::g_shadow_arena_bytes;

inline void access(const volatile void* p, size_t bytes, bool write, const void* pc) {
  ember::cudasim::KernelContext* k = g_kernel;
  if (k == nullptr) return;  // host code, or checks off
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a - reinterpret_cast<uintptr_t>(k->shared) < k->shared_capacity) {
    ember::cudasim::check_shared_access(*k, a, bytes, write, pc);
  } else if (a - g_shadow_arena_begin < g_shadow_arena_bytes) {
    ember::cudasim::check_global_access(*k, a, bytes, write, pc);
  }
}

inline void atomic_access(const volatile void* p, size_t bytes, const void* pc) {
  ember::cudasim::KernelContext* k = g_kernel;
  if (k == nullptr) return;
  ember::cudasim::check_atomic_access(*k, reinterpret_cast<uintptr_t>(p), bytes, pc);
}

}  // namespace

#define EMBER_PC __builtin_return_address(0)

extern "C" {

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define EMBER_PLAIN_ACCESS(n)                                                          \
  void __tsan_read##n(void* p) { access(p, n, false, EMBER_PC); }                      \
  void __tsan_write##n(void* p) { access(p, n, true, EMBER_PC); }                      \
  void __tsan_unaligned_read##n(const void* p) { access(p, n, false, EMBER_PC); }      \
  void __tsan_unaligned_write##n(void* p) { access(p, n, true, EMBER_PC); }            \
  void __tsan_volatile_read##n(void* p) { access(p, n, false, EMBER_PC); }             \
  void __tsan_volatile_write##n(void* p) { access(p, n, true, EMBER_PC); }
EMBER_PLAIN_ACCESS(1)
EMBER_PLAIN_ACCESS(2)
EMBER_PLAIN_ACCESS(4)
EMBER_PLAIN_ACCESS(8)
EMBER_PLAIN_ACCESS(16)
#undef EMBER_PLAIN_ACCESS

void __tsan_read_range(void* p, size_t bytes) { access(p, bytes, false, EMBER_PC); }
void __tsan_write_range(void* p, size_t bytes) { access(p, bytes, true, EMBER_PC); }

// order / failure_order: the caller's memory orders, ignored (every atomic is seq_cst here).
#define EMBER_ATOMIC(bits, T)                                                                   \
  T __tsan_atomic##bits##_load(const volatile T* a, int) {                                      \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                \
  }                                                                                             \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                   \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                   \
  }                                                                                             \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                   \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                             \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                                  \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                          \
  }                                                                                             \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                                  \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                          \
  }                                                                                             \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                                  \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                          \
  }                                                                                             \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                   \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                           \
  }                                                                                             \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                                  \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                          \
  }                                                                                             \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                 \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                             \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* expected, T v, int, int) { \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST,                 \
                                       __ATOMIC_SEQ_CST);                                       \
  }                                                                                             \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* expected, T v, int, int) {   \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    return __atomic_compare_exchange_n(a, expected, v, true, __ATOMIC_SEQ_CST,                  \
                                       __ATOMIC_SEQ_CST);                                       \
  }                                                                                             \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T expected, T v, int, int) {      \
    atomic_access(a, sizeof(T), EMBER_PC);                                                      \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);    \
    return expected;                                                                            \
  }
EMBER_ATOMIC(8, uint8_t)
EMBER_ATOMIC(16, uint16_t)
EMBER_ATOMIC(32, uint32_t)
EMBER_ATOMIC(64, uint64_t)
#undef EMBER_ATOMIC

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
