// Winograd F(2x2, 3x3) float convolution for 3x3, stride-1, undilated, ungrouped layers (ResNet's
// 3x3 layers and, through the flipped kernel, their input gradients; winograd_conv.cc), and its
// backward: the weight gradient and, with it, the input gradient (winograd_backward.cc). Internal
// to tensor/ (conv_kernels.cc). Note [Winograd F(2x2, 3x3)] in winograd_conv.cc.
#pragma once

#include <cstdint>

#include "tensor/cpu/capability_namespace.h"
#include "tensor/cpu/conv_geometry.h"

namespace ember::cpu {
namespace CPU_CAPABILITY {  // Note [CPU capability namespaces]

// Whether winograd_conv handles this geometry with O output channels (otherwise: the direct kernel
// or im2col + GEMM).
bool winograd_conv_applies(const ConvGeometry& g, int64_t O);

// Where the kernel of output channel o and input channel c is: kAsGiven, weight [O, C, 3, 3];
// kFlippedTransposed, the weight [C, O, 3, 3] of the convolution whose input gradient this one
// computes, read with its taps reversed (so the gradient needs no flipped copy of it);
// kTransposed, that weight [C, O, 3, 3] with its taps as they are: then U[x] [C, O] is the
// transpose of the forward convolution's U[x], which winograd_backward's input gradient needs.
enum class WinogradWeight { kAsGiven, kFlippedTransposed, kTransposed };

// The transformed weights U [16, O, C]: computed once per call and shared by every image. `u`
// holds winograd_weight_size floats.
int64_t winograd_weight_size(const ConvGeometry& g, int64_t O);
void winograd_transform_weight(const float* weight, WinogradWeight layout, const ConvGeometry& g,
                               int64_t O, float* u);

// `images` consecutive images: out [images, O, Ho, Wo] = conv(in [images, C, H, W], weight) from
// the transformed weights `u`, their tiles side by side in one GEMM per transformed position;
// `scratch` holds winograd_conv_scratch_size floats (any contents). Each output is computed the
// same way whatever `images` is. winograd_images_per_call: the count that fills the GEMMs' tiles.
int64_t winograd_images_per_call(const ConvGeometry& g);
int64_t winograd_conv_scratch_size(const ConvGeometry& g, int64_t O, int64_t images);
void winograd_conv(const float* in, const float* u, const ConvGeometry& g, int64_t O,
                   int64_t images, float* out, float* scratch);

// Whether winograd_backward computes this geometry's weight gradient: winograd_conv's, on maps of
// at least 16 tiles; and whether it also computes the input gradient: C a multiple of 4 too.
bool winograd_weight_grad_applies(const ConvGeometry& g, int64_t O);
bool winograd_input_grad_applies(const ConvGeometry& g, int64_t O);

// What winograd_backward reads and writes for `images` consecutive images.
struct WinogradBackward {
  const float* in;        // [images, C, H, W]
  const float* grad_out;  // [images, O, Ho, Wo]
  float* du;              // [16, O, C] (winograd_weight_size floats): set to the images' dU summed
  // Where the input gradient is wanted (winograd_input_grad_applies): ut, the transformed weights
  // as winograd_transform_weight(kTransposed) makes them (C rows of O), and dx [images, C, H, W],
  // set. Otherwise both null.
  const float* ut = nullptr;
  float* dx = nullptr;
};

// The backward of `images` consecutive images in the transformed domain (Note [Winograd weight
// gradient], Note [Winograd input gradient]): one pass over the images' tiles side by side makes
// their dM = A dY A^T, sums dU = dM V^T into du and, with ut, makes dx by the adjoint of the
// forward's transforms from the same dM. `scratch` holds winograd_backward_scratch_size floats
// (any contents). winograd_weight_grad_transform then sets gw [O, C, 3, 3] = G^T du G, once for
// the dU of every image summed. dx does not depend on `images`: each image's is computed alone.
int64_t winograd_backward_scratch_size(const ConvGeometry& g, int64_t O, int64_t images);
void winograd_backward(const WinogradBackward& args, const ConvGeometry& g, int64_t O,
                       int64_t images, float* scratch);
void winograd_weight_grad_transform(const float* du, const ConvGeometry& g, int64_t O, float* gw);

}  // namespace CPU_CAPABILITY
using namespace CPU_CAPABILITY;
}  // namespace ember::cpu
