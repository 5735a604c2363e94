#include "tensor/device.h"

#include <stdexcept>

#include "tensor/error.h"

namespace ember {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::kCPU;
    index = 0;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::kCUDA;
    index = 0;
    if (spec.size() > 4) {
      EMBER_CHECK(spec[4] == ':' && spec.size() > 5, "Device: cannot parse '", spec,
                  "' (expected 'cpu', 'cuda' or 'cuda:N')");
      try {
        size_t used = 0;
        index = std::stoi(spec.substr(5), &used);
        // stoi stops at the first non-digit; "cuda:1x" must not parse as cuda:1.
        if (used != spec.size() - 5) throw std::invalid_argument(spec);
      } catch (const std::exception&) {
        EMBER_THROW("Device: cannot parse '", spec, "' (expected 'cpu', 'cuda' or 'cuda:N')");
      }
      EMBER_CHECK(index >= 0, "Device: negative index in '", spec, "'");
    }
    return;
  }
  EMBER_THROW("Device: cannot parse '", spec, "' (expected 'cpu', 'cuda' or 'cuda:N')");
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace ember
