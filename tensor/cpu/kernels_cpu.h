// Internal to tensor/: each CPU kernel family fills its slots of the CPU KernelTable.
#pragma once

#include "tensor/kernels.h"

namespace ember::cpu {
void register_elementwise_kernels(KernelTable& table);
void register_reduction_kernels(KernelTable& table);
void register_gemm_kernels(KernelTable& table);
}  // namespace ember::cpu
