#include "distributed/hooks/default_hooks.h"

#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::distributed {
namespace {

FuturePtr compress_hook(ProcessGroup& group, GradBucket& bucket, ScalarType dtype) {
  EMBER_CHECK(!bucket.buffer().is_sparse(), "compress hook: bucket ", bucket.index(),
              " is sparse; compression hooks support dense buckets only");
  NoGradGuard no_grad;
  // As PyTorch: cast first, then divide in the compressed format.
  Tensor compressed = bucket.buffer().to(dtype, /*copy=*/true);
  div_(compressed, static_cast<double>(group.size()));
  std::vector<Tensor> tensors{compressed};
  Tensor buffer = bucket.buffer();
  // The decompression is one copy of the bucket: cheap enough for the worker thread.
  return group.allreduce(tensors)->get_future()->then([buffer, compressed](Future&) {
    NoGradGuard guard;
    copy_(buffer, compressed);
    return std::vector<Tensor>{buffer};
  });
}

}  // namespace

FuturePtr allreduce_hook(ProcessGroup& group, GradBucket& bucket) {
  NoGradGuard no_grad;
  Tensor buffer = bucket.buffer();
  // Sparse: the same scaling as the default path (sparse_mul_scalar by 1/world), then the gather.
  if (buffer.is_sparse()) {
    return allreduce_sparse(group, sparse_mul_scalar(buffer, 1.0 / static_cast<double>(group.size())));
  }
  div_(buffer, static_cast<double>(group.size()));
  std::vector<Tensor> tensors{buffer};
  return group.allreduce(tensors)->get_future();
}

FuturePtr fp16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(group, bucket, kFloat16);
}

FuturePtr bf16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(group, bucket, kBFloat16);
}

FuturePtr noop_hook(ProcessGroup&, GradBucket& bucket) {
  auto fut = std::make_shared<Future>();
  fut->mark_completed({bucket.buffer()});
  return fut;
}

FuturePtr run_compressed(GradBucket& bucket, ScalarType dtype,
                         const std::function<FuturePtr(GradBucket&)>& hook) {
  EMBER_CHECK(!bucket.buffer().is_sparse(), "compress wrapper: bucket ", bucket.index(),
              " is sparse; compression wrappers support dense buckets only");
  Tensor original = bucket.buffer();
  {
    NoGradGuard no_grad;
    bucket.set_buffer(original.to(dtype, /*copy=*/true));
  }
  FuturePtr inner = hook(bucket);
  EMBER_CHECK(inner != nullptr, "compress wrapper: the wrapped hook returned no Future");
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
