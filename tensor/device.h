// Device: where a tensor's bytes live (CPU, or CUDA:i when built with --config=cuda).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };

// A device type and index (PyTorch's torch.device): kCPU, {DeviceType::kCUDA, 1}, Device("cuda:1").
// Parsing throws ember::Error unless "cpu", "cuda" or "cuda:N"; every CPU device compares equal.
struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit from DeviceType
  // Parses "cpu", "cuda", "cuda:1".
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;

  bool operator==(const Device& o) const { return type == o.type && (is_cpu() || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline const Device kCPU{DeviceType::kCPU, 0};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace ember
