// The stateless DDP communication hooks (PyTorch's ddp_comm_hooks/default_hooks.py) and the enum of
// built-in hooks: allreduce, fp16/bf16 compression, the compression wrappers and noop. DESIGN.md
// step 10: every hook receives un-scaled gradients and divides by the world size itself.
#pragma once

#include <functional>
#include <utility>

#include "distributed/hooks/comm_hook.h"

namespace ember::distributed {

// Divides the flat buffer by the world size in place, then sum-allreduces it. The same arithmetic,
// in the same order, as the default path (which divides each gradient while copying it into the
// bucket), so results are bit-identical to DDP without a hook.
FuturePtr allreduce_hook(ProcessGroup& group, GradBucket& bucket);

// Casts the buffer to float16 / bfloat16, divides by the world size, allreduces, and decompresses
// into the bucket's buffer (its own dtype) in the Future's callback.
FuturePtr fp16_compress_hook(ProcessGroup& group, GradBucket& bucket);
FuturePtr bf16_compress_hook(ProcessGroup& group, GradBucket& bucket);

// No communication: the Future holds the local buffer (for measuring the cost of communication).
// Gradients stay local (and un-averaged): parameters diverge across ranks. Debugging only.
FuturePtr noop_hook(ProcessGroup& group, GradBucket& bucket);

// Shared by the wrappers: casts the bucket's buffer to `dtype`, runs `hook` on it, and copies the
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

// PyTorch's dist.BuiltinCommHookType (plus BF16_COMPRESS and NOOP). The state is the DDP's group.
enum class BuiltinCommHookType { ALLREDUCE, FP16_COMPRESS, BF16_COMPRESS, NOOP };
const char* builtin_comm_hook_name(BuiltinCommHookType type);
std::unique_ptr<CommHookInterface> make_builtin_comm_hook(BuiltinCommHookType type,
                                                          ProcessGroupPtr group);

}  // namespace ember::distributed
