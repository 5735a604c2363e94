// CUDA streams and events for users (torch.cuda.Stream / Event / torch.cuda.stream()): work queued
// by ember's ops (kernels, copies, allocations) goes to the current stream of its device, which is
// the default stream unless a CudaStreamGuard names another. Every call needs a CUDA backend
// (--config=cuda or --config=cudasim) and throws a clear error without one.
#pragma once

#include <memory>

namespace ember {

class CudaEvent;

// A CUDA stream (PyTorch's torch.cuda.Stream), a shared handle: copies refer to the same stream,
// and a created stream is destroyed with its last copy. Throws without a CUDA backend.
class CudaStream {
 public:
  // A new stream on `device`, destroyed with its last copy.
  static CudaStream create(int device = 0);
  // The stream ember's ops on `device` use now, on this thread.
  static CudaStream current(int device = 0);
  // A stream from a per-device pool of four that are never destroyed (c10's getStreamFromPool),
  // handed out round-robin. For streams that allocate: the caching allocator ties a block to the
  // stream it was allocated on, and such blocks may outlive whoever used the stream.
  static CudaStream from_pool(int device = 0);
  // The default (legacy) stream.
  static CudaStream default_stream(int device = 0);

  int device() const { return device_; }
  void* handle() const { return handle_.get(); }  // the cudaStream_t
  // Blocks until everything queued on the stream has run.
  void synchronize() const;
  // Work queued on this stream after the call waits for `event`.
  void wait(const CudaEvent& event) const;

 private:
  CudaStream(std::shared_ptr<void> handle, int device)
      : handle_(std::move(handle)), device_(device) {}
  std::shared_ptr<void> handle_;
  int device_ = 0;
};

// Makes `stream` the current stream of its device for a scope (torch.cuda.stream(s)).
class CudaStreamGuard {
 public:
  explicit CudaStreamGuard(const CudaStream& stream);
  ~CudaStreamGuard();
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;

 private:
  CudaStream stream_;
  void* previous_;
};

// A CUDA event (PyTorch's torch.cuda.Event), a shared handle destroyed with its last copy: record()
// marks a point in a stream that other streams wait for (CudaStream::wait) and timings measure.
class CudaEvent {
 public:
  explicit CudaEvent(bool enable_timing = false);
  // Marks the point in `stream` (default: the current stream of device 0) that waits and timings
  // refer to.
  void record(const CudaStream& stream);
  void record();
  void synchronize() const;
  // Milliseconds between this event and a later recorded `end` (both created with timing).
  float elapsed_ms(const CudaEvent& end) const;
  void* handle() const { return handle_.get(); }

 private:
  std::shared_ptr<void> handle_;
};

// Blocks until all work on `device` has run (torch.cuda.synchronize).
void cuda_synchronize(int device = 0);

}  // namespace ember
