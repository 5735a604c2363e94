// Shared by the CUDA backend's *_slots.cc files, which fill kernel_table(DeviceType::kCUDA) with
// the launchers of tensor/cuda/*.cu: turning Tensors into the plain pointers, dtypes and Indexers
// those take, and reporting launch failures with the op and its operands.
#pragma once

#include <initializer_list>
#include <vector>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/current_stream.h"
#include "tensor/cuda/launch.h"
#include "tensor/kernels.h"

namespace ember::cuda {

inline DType dtype_of(const Tensor& t) { return static_cast<DType>(t.dtype()); }
ScalarArg scalar_arg(const Scalar& s);

// The Indexer of an iteration space of `sizes` over operands with these element strides: size-1
// dims dropped, and neighbouring dims merged where every operand is contiguous across them, so a
// dense tensor is one dim and each thread's offset costs one division.
Indexer make_indexer(const char* op, const Shape& sizes, const std::vector<Shape>& strides);
// Over operands[0]'s shape, the others already expanded to it.
Indexer make_indexer(const char* op, std::initializer_list<const Tensor*> operands);

// Throws, naming the op and its output, when a launcher returned an error.
void check_launch(int error, const char* op, const Tensor& out);

inline cudaStream_t stream_of(const Tensor& t) { return current_stream(t.device().index); }

}  // namespace ember::cuda
