// Direct float convolution for stride 1, no dilation, one group (ResNet's 3x3 layers, and their
// input gradients, which are such convolutions too): no im2col. Internal to tensor/ (conv.cc).
//
// The image is zero-padded once into a [C, H + 2ph, W + 2pw] buffer. On that padded-width grid the
// input behind output position q = oh * Wp + ow for kernel tap (c, i, j) sits at
// c * plane + i * Wp + j + q: each row of the would-be column matrix is the padded plane shifted by
// a constant, so the product reads it straight from the input. Outputs are computed for all Wp
// columns of each row; the last Wp - Wo of them straddle two rows and are dropped when the result
// is compacted into [O, Ho, Wo].
#pragma once

#include <cstdint>

#include "tensor/cpu/capability_namespace.h"
#include "tensor/cpu/im2col.h"

namespace ember::cpu {
namespace CPU_CAPABILITY {  // Note [CPU capability namespaces]

// Whether direct_conv handles this geometry with O output channels (otherwise: im2col + GEMM).
bool direct_conv_applies(const ConvGeometry& g, int64_t O);

// Floats of scratch direct_conv needs for one image.
int64_t direct_conv_scratch_size(const ConvGeometry& g, int64_t O);

// One image: out [O, Ho, Wo] = conv(in [C, H, W], weight [O, C, kh, kw]); `scratch` holds
// direct_conv_scratch_size floats (any contents).
void direct_conv(const float* in, const float* weight, const ConvGeometry& g, int64_t O, float* out,
                 float* scratch);

// One image's weight gradient by the same grid: gw [O, C, kh, kw] += the correlation of the
// output gradient grad_out [O, Ho, Wo] with in [C, H, W] (applies where direct_conv does).
int64_t direct_conv_weight_grad_scratch_size(const ConvGeometry& g, int64_t O);
void direct_conv_weight_grad(const float* in, const float* grad_out, const ConvGeometry& g,
                             int64_t O, float* gw, float* scratch);

}  // namespace CPU_CAPABILITY
using namespace CPU_CAPABILITY;
}  // namespace ember::cpu
