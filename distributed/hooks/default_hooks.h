// The stateless DDP communication hooks (PyTorch's ddp_comm_hooks/default_hooks.py): allreduce,
// fp16/bf16 compression, the compression wrappers and noop, and the one table of built-in hooks
// (EMBER_BUILTIN_COMM_HOOKS) that BuiltinCommHookType and its factory are generated from. docs/design.md
// step 10; each hook divides by the world size itself: Note [Who divides gradients by the world
// size] in comm_hook.h.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "distributed/hooks/comm_hook.h"

namespace ember::distributed {

// Divides the flat buffer by the world size in place, then sum-allreduces it: bit-identical to DDP
// without a hook (see the Note).
FuturePtr allreduce_hook(ProcessGroup& group, GradBucket& bucket);

// Casts the buffer to float16 / bfloat16, divides by the world size, allreduces, and decompresses
// into the bucket's buffer (its own dtype) in the Future's callback.
FuturePtr fp16_compress_hook(ProcessGroup& group, GradBucket& bucket);
FuturePtr bf16_compress_hook(ProcessGroup& group, GradBucket& bucket);

// No communication: the Future holds the local buffer (for measuring the cost of communication).
// Gradients stay local (and un-averaged): parameters diverge across ranks. Debugging only.
FuturePtr noop_hook(ProcessGroup& group, GradBucket& bucket);

// Shared by the fp16/bf16 hooks and wrappers: casts the bucket's buffer to `dtype`, runs `hook` on it, and copies the
// hook's result back into the original buffer.
FuturePtr run_compressed(GradBucket& bucket, ScalarType dtype,
                         const std::function<FuturePtr(GradBucket&)>& hook);

// fp16_compress_wrapper(hook): the wrapped hook sees a float16 (bfloat16) buffer and must do its own
// division; the result is cast back into the bucket's dtype. Works with any state type:
//   ddp.register_comm_hook<ProcessGroup>(pg, fp16_compress_wrapper(allreduce_hook));
template <typename Hook>
auto fp16_compress_wrapper(Hook hook) {
  return [hook = std::move(hook)](auto& state, GradBucket& bucket) -> FuturePtr {
    return run_compressed(bucket, kFloat16, [&](GradBucket& b) { return hook(state, b); });
  };
}
template <typename Hook>
auto bf16_compress_wrapper(Hook hook) {
  return [hook = std::move(hook)](auto& state, GradBucket& bucket) -> FuturePtr {
    return run_compressed(bucket, kBFloat16, [&](GradBucket& b) { return hook(state, b); });
  };
}

// Note [Built-in comm hooks]
// PyTorch's dist.BuiltinCommHookType (ALLREDUCE, FP16_COMPRESS) plus ember's BF16_COMPRESS and NOOP,
// written once: X(TYPE, "name", hook, "help") is the enum value, the command-line name
// (--comm_hook=name), the hook above (its state: the DDP's process group) and one line of help.
// The enum, builtin_comm_hook_name, make_builtin_comm_hook, kBuiltinCommHooks and the tools' table
// (examples/common/comm_hook_by_name.cc) are generated from it: a new stateless hook is one row.
// PowerSGD is not a row: its state (rank, start iteration, error feedback) is built from options and
// handed back to the caller for checkpoints, which register_builtin_comm_hook(type) cannot express,
// and :powersgd depends on this library. The tools' table adds it with a factory taking the options.
#define EMBER_BUILTIN_COMM_HOOKS(X)                                                                \
  X(kAllreduce, "allreduce", allreduce_hook, "divide by the world size, then allreduce (as none)") \
  X(kFp16Compress, "fp16", fp16_compress_hook, "allreduce in float16: half the bytes")             \
  X(kBf16Compress, "bf16", bf16_compress_hook, "allreduce in bfloat16: half the bytes")            \
  X(kNoop, "noop", noop_hook, "no communication, to measure its cost (ranks diverge)")

#define EMBER_BUILTIN_COMM_HOOK_ENUM(type, name, hook, help) type,
enum class BuiltinCommHookType { EMBER_BUILTIN_COMM_HOOKS(EMBER_BUILTIN_COMM_HOOK_ENUM) };
#undef EMBER_BUILTIN_COMM_HOOK_ENUM

// One row of EMBER_BUILTIN_COMM_HOOKS, for code that lists or chooses hooks at run time.
struct BuiltinCommHookInfo {
  BuiltinCommHookType type;
  const char* name;  // command-line name, e.g. "fp16"
  const char* help;
};
#define EMBER_BUILTIN_COMM_HOOK_INFO(type, name, hook, help) {BuiltinCommHookType::type, name, help},
inline constexpr BuiltinCommHookInfo kBuiltinCommHooks[] = {
    EMBER_BUILTIN_COMM_HOOKS(EMBER_BUILTIN_COMM_HOOK_INFO)};
#undef EMBER_BUILTIN_COMM_HOOK_INFO

// "builtin <hook function>", e.g. "builtin fp16_compress_hook": the hook's name in DDP's logging data.
const char* builtin_comm_hook_name(BuiltinCommHookType type);
std::unique_ptr<CommHookInterface> make_builtin_comm_hook(BuiltinCommHookType type,
                                                          ProcessGroupPtr group);

}  // namespace ember::distributed
