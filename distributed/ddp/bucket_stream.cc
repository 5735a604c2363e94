// docs/design.md steps 9-12 on a GPU (Note [Bucket copies on the communication stream]).
#include "distributed/ddp/bucket_stream.h"

namespace ember::distributed {

BucketStream::BucketStream(Device device)
    : device_(device.index), stream_(CudaStream::from_pool(device.index)) {}

std::optional<CudaStreamGuard> BucketStream::after_current() {
  event_.record(CudaStream::current(device_));
  stream_.wait(event_);
  return std::optional<CudaStreamGuard>(std::in_place, stream_);
}

void BucketStream::current_waits() {
  event_.record(stream_);
  CudaStream::current(device_).wait(event_);
}

}  // namespace ember::distributed
