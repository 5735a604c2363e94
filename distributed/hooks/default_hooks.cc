#include "distributed/hooks/default_hooks.h"

#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::distributed {

FuturePtr allreduce_hook(ProcessGroup& group, GradBucket& bucket) {
  NoGradGuard no_grad;
  Tensor buffer = bucket.buffer();
  // The default path's scaling (by 1/world, as its mul_out: Note [Who divides gradients by the
  // world size]), so this hook and no hook give bit-identical gradients; sparse: then the gather.
  const double scale = 1.0 / static_cast<double>(group.size());
  if (buffer.is_sparse()) return allreduce_sparse(group, sparse_mul_scalar(buffer, scale));
  mul_(buffer, scale);
  std::vector<Tensor> tensors{buffer};
  return group.allreduce(tensors)->get_future();
}

// As PyTorch's: cast first, then the default hook divides and reduces in the compressed format.
FuturePtr fp16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return run_compressed(bucket, kFloat16, [&group](GradBucket& b) { return allreduce_hook(group, b); });
}

FuturePtr bf16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return run_compressed(bucket, kBFloat16, [&group](GradBucket& b) { return allreduce_hook(group, b); });
}

FuturePtr noop_hook(ProcessGroup&, GradBucket& bucket) {
  auto fut = std::make_shared<Future>();
  fut->mark_completed({bucket.buffer()});
  return fut;
}

FuturePtr run_compressed(GradBucket& bucket, ScalarType dtype,
                         const std::function<FuturePtr(GradBucket&)>& hook) {
  EMBER_CHECK(!bucket.buffer().is_sparse(), "fp16/bf16 compression: bucket ", bucket.index(),
              " is sparse; compression supports dense buckets only");
  Tensor original = bucket.buffer();
  {
    NoGradGuard no_grad;
    bucket.set_buffer(original.to(dtype, /*copy=*/true));
  }
  FuturePtr inner = hook(bucket);
  EMBER_CHECK(inner != nullptr, "fp16/bf16 compression: the wrapped hook returned no Future");
  return inner->then([original](Future& f) {
    NoGradGuard no_grad;
    copy_(original, f.value().at(0).reshape(original.sizes()));
    return std::vector<Tensor>{original};
  });
}

const char* builtin_comm_hook_name(BuiltinCommHookType type) {
#define EMBER_BUILTIN_COMM_HOOK_NAME(t, name, hook, help) \
  case BuiltinCommHookType::t: return "builtin " #hook;
  switch (type) { EMBER_BUILTIN_COMM_HOOKS(EMBER_BUILTIN_COMM_HOOK_NAME) }
#undef EMBER_BUILTIN_COMM_HOOK_NAME
  return "builtin ?";
}

std::unique_ptr<CommHookInterface> make_builtin_comm_hook(BuiltinCommHookType type,
                                                          ProcessGroupPtr group) {
  EMBER_CHECK(group != nullptr, "make_builtin_comm_hook: null process group");
  CppCommHook<ProcessGroup>::Hook hook;
#define EMBER_BUILTIN_COMM_HOOK_FN(t, name, fn, help) \
  case BuiltinCommHookType::t: hook = fn; break;
  switch (type) { EMBER_BUILTIN_COMM_HOOKS(EMBER_BUILTIN_COMM_HOOK_FN) }
#undef EMBER_BUILTIN_COMM_HOOK_FN
  EMBER_CHECK(hook != nullptr, "make_builtin_comm_hook: unknown hook type ", static_cast<int>(type));
  return std::make_unique<CppCommHook<ProcessGroup>>(std::move(group), std::move(hook),
                                                     builtin_comm_hook_name(type));
}

}  // namespace ember::distributed
