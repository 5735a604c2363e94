// The seam between device-agnostic tensor code and a device backend (CUDA under --config=cuda).
// A backend registers how to move bytes; kernels for ops on that device register separately.
// Without a registered backend, using the device throws an error naming the op.
#pragma once

#include <cstddef>

#include "tensor/device.h"

namespace ember {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Copies nbytes between any two devices at least one of which is this backend's.
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t nbytes) = 0;
  virtual void fill_zero(void* dst, Device device, size_t nbytes) = 0;
  virtual void synchronize(Device device) = 0;
  virtual int device_count() = 0;
};

void register_device_backend(DeviceType type, DeviceBackend* backend);
// Throws "<op>: no <device> backend: ember was built without CUDA (--config=cuda)" when missing.
DeviceBackend& device_backend(DeviceType type, const char* op);
bool has_device_backend(DeviceType type);

// Number of CUDA devices usable now (0 without a CUDA build, a driver, or a GPU).
int cuda_device_count();
bool cuda_is_available();

}  // namespace ember
