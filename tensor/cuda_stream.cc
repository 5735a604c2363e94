#include "tensor/cuda_stream.h"

#include <map>
#include <mutex>
#include <vector>

#include "tensor/device_backend.h"

namespace ember {
namespace {
DeviceBackend& cuda(const char* op) { return device_backend(DeviceType::kCUDA, op); }
}  // namespace

CudaStream CudaStream::create(int device) {
  DeviceBackend& b = cuda("CudaStream::create");
  return CudaStream(
      std::shared_ptr<void>(b.create_stream(device), [&b](void* s) { b.destroy_stream(s); }),
      device);
}

CudaStream CudaStream::from_pool(int device) {
  constexpr size_t kPoolSize = 4;
  DeviceBackend& b = cuda("CudaStream::from_pool");
  static std::mutex mutex;
  static auto* pools = new std::map<int, std::pair<std::vector<void*>, size_t>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  auto& [streams, next] = (*pools)[device];
  if (streams.size() < kPoolSize) streams.push_back(b.create_stream(device));
  void* stream = streams[next++ % streams.size()];
  return CudaStream(std::shared_ptr<void>(stream, [](void*) {}), device);
}

CudaStream CudaStream::current(int device) {
  // Not owned: the stream's owner (a CudaStream, or nobody for the default) keeps it alive.
  return CudaStream(
      std::shared_ptr<void>(cuda("CudaStream::current").current_stream(device), [](void*) {}),
      device);
}

CudaStream CudaStream::default_stream(int device) {
  cuda("CudaStream::default_stream");
  return CudaStream(std::shared_ptr<void>(nullptr, [](void*) {}), device);
}

void CudaStream::synchronize() const {
  cuda("CudaStream::synchronize").synchronize_stream(handle());
}

void CudaStream::wait(const CudaEvent& event) const {
  cuda("CudaStream::wait").stream_wait_event(handle(), event.handle());
}

CudaStreamGuard::CudaStreamGuard(const CudaStream& stream)
    : stream_(stream), previous_(cuda("CudaStreamGuard").current_stream(stream.device())) {
  cuda("CudaStreamGuard").set_current_stream(stream.device(), stream.handle());
}

CudaStreamGuard::~CudaStreamGuard() {
  cuda("CudaStreamGuard").set_current_stream(stream_.device(), previous_);
}

CudaEvent::CudaEvent(bool enable_timing) {
  DeviceBackend& b = cuda("CudaEvent");
  handle_ =
      std::shared_ptr<void>(b.create_event(enable_timing), [&b](void* e) { b.destroy_event(e); });
}

void CudaEvent::record(const CudaStream& stream) {
  cuda("CudaEvent::record").record_event(handle(), stream.handle());
}

void CudaEvent::record() { record(CudaStream::current(0)); }

void CudaEvent::synchronize() const { cuda("CudaEvent::synchronize").synchronize_event(handle()); }

float CudaEvent::elapsed_ms(const CudaEvent& end) const {
  return cuda("CudaEvent::elapsed_ms").event_elapsed_ms(handle(), end.handle());
}

void cuda_synchronize(int device) {
  cuda("cuda_synchronize").synchronize(Device(DeviceType::kCUDA, device));
}

}  // namespace ember
