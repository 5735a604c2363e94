#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu {

KernelTable make_kernel_table() {
  KernelTable table;
  register_elementwise_kernels(table);
  register_reduction_kernels(table);
  register_gemm_kernels(table);
  return table;
}

}  // namespace ember::cpu
