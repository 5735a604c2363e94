// docs/design.md steps 9-12 on a GPU: the stream a CUDA Reducer queues its bucket copies, comm hooks and
// collectives on, apart from the compute stream that runs backward.
// Note [Bucket copies on the communication stream]
// Backward runs on the compute stream (the caller's current stream). When a gradient is ready, the
// Reducer records an event there and queues the copy into its bucket (and the division by the world
// size) on the bucket stream after it; a full bucket's comm hook is launched with the bucket
// stream current, so ProcessGroupNCCL's communication stream waits for those copies, not for the
// compute stream's later kernels (Note [NCCL streams and completion]). The rest of backward thus
// never waits for a copy or a collective; finalize_backward makes the compute stream wait for the
// bucket stream before it writes the results back into .grad.
// PyTorch copies on the compute stream instead (the autograd engine's stream for the gradient),
// which orders every copy before the later kernels of backward; here only the event is.
// Nothing is allocated on the compute stream and freed on the bucket stream or the other way
// round while work may be pending: gradients stay referenced by .grad until finalize has ordered
// the compute stream after the copies (Note [Caching allocator streams]).
#pragma once

#include <optional>

#include "tensor/cuda_stream.h"
#include "tensor/device.h"

namespace ember::distributed {

// The stream a CUDA Reducer's bucket work runs on (the Note above), taken from the device's pool,
// and the event that orders it against the current stream. Needs a CUDA backend.
class BucketStream {
 public:
  // A stream from the device's pool (CudaStream::from_pool: allocations of comm hooks on it may
  // outlive the Reducer in the caching allocator).
  explicit BucketStream(Device device);

  // Makes the bucket stream current for the guard's scope, after everything queued on the current
  // stream so far.
  std::optional<CudaStreamGuard> after_current();
  // Work queued on the current stream from now on waits for everything queued on the bucket stream.
  void current_waits();

 private:
  int device_;
  CudaStream stream_;
  CudaEvent event_;  // reused: a wait captures the event's state when it is queued
};

}  // namespace ember::distributed
