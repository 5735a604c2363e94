// Host-callable launchers for the CUDA kernels in tensor/cuda/*.cu. Plain pointers and sizes only,
// so nvcc never sees ember's headers; the checks and the kernel-table glue live in cuda_kernels.cc.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember::cuda {

// Must match the order the launchers switch on (cuda_kernels.cc maps ember's enums onto these).
enum class BinaryKind : int { Add, Sub, Mul, Div };
enum class UnaryKind : int { Neg, Relu };

// out[i] = a[i * a_step] (op) alpha * b[i * b_step] for i < n; a step of 0 broadcasts one element.
// Returns the launch's cudaError_t as an int (0 on success).
int launch_binary_f32(BinaryKind op, float* out, const float* a, int64_t a_step, const float* b,
                      int64_t b_step, float alpha, int64_t n, cudaStream_t stream);
// out[i] = op(in[i]) for i < n.
int launch_unary_f32(UnaryKind op, float* out, const float* in, int64_t n,
                     cudaStream_t stream);

}  // namespace ember::cuda
