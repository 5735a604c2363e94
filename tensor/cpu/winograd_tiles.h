// The tiling and the steps that Winograd's forward (winograd_conv.cc) and backward
// (winograd_backward.cc) share. Internal to tensor/cpu; Note [Winograd flat tiles] in
// winograd_conv.cc.
#pragma once

#include <cstdint>

#include "tensor/cpu/capability_namespace.h"
#include "tensor/cpu/conv_geometry.h"

namespace ember::cpu::CPU_CAPABILITY::winograd {  // Note [CPU capability namespaces]

constexpr int64_t kRows = 4;  // output channels per GEMM tile: O is a multiple of it

struct Tiling {
  int64_t th, tw;  // tile rows and columns that hold outputs
  int64_t tq;      // tiles per row as computed: tw, or tw + 1 with a junk tile
  int64_t T;       // tiles as computed (th tq): GEMM columns
  int64_t Tpad;    // T rounded up to whole vectors
  int64_t shift;   // 1 where the planes drop the left padding column (Note [Winograd compact rows])
  int64_t S;       // positions per parity plane the row pass computes: Tpad + tq
  int64_t plane;   // floats per parity plane: a float before the rows (read when shift is 1),
                   // rows of 2 tq, then a zero tail the last reads reach
};

Tiling tiling(const ConvGeometry& g);

// V [16, C, ld] (this image's Tpad columns) = B^T d B for every channel and tile of one image.
// `planes` holds 2 t.plane floats, `h` 8 t.S.
void transform_input(const float* in, const ConvGeometry& g, const Tiling& t, float* v, int64_t ld,
                     float* planes, float* h);

// M [16, O, L] = U [16, O, C] x V [16, C, L], one GEMM per transformed position; O a multiple of
// kRows.
void multiply(const float* u, const float* v, int64_t C, int64_t O, int64_t L, float* m);

}  // namespace ember::cpu::CPU_CAPABILITY::winograd
