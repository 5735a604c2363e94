// The shape of one 2-d convolution, shared by the op (tensor/conv.cc) and its CPU kernels.
#pragma once

#include <cstdint>

namespace ember::cpu {

struct ConvGeometry {
  int64_t N, C, H, W;     // input
  int64_t kh, kw;         // kernel
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t Ho, Wo;         // output
};

}  // namespace ember::cpu
