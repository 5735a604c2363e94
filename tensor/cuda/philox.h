// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): four 32-bit
// outputs that are a pure function of a 128-bit counter and a 64-bit key. Header-only and usable on
// the host and the device, so tests/tensor/cuda/philox_test.cc checks it against the published
// known-answer vectors in any build.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember::cuda {

struct Philox4 {
  uint32_t x[4];
};

EMBER_HOST_DEVICE inline Philox4 philox4x32_10(Philox4 counter, uint64_t key) {
  uint32_t c0 = counter.x[0], c1 = counter.x[1], c2 = counter.x[2], c3 = counter.x[3];
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The draws of element `index` of a tensor under `key`: counter (index, 0).
EMBER_HOST_DEVICE inline Philox4 philox_for_element(uint64_t index, uint64_t key) {
  return philox4x32_10(
      Philox4{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}}, key);
}

}  // namespace ember::cuda
