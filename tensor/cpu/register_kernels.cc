// One capability level's CPU kernels, all families (Note [CPU capability namespaces]).
#include "tensor/cpu/capability_namespace.h"
#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu::CPU_CAPABILITY {

void register_kernels(KernelTable& table) {
  register_elementwise_kernels(table);
  register_copy_kernels(table);
  register_indexing_kernels(table);
  register_random_kernels(table);
  register_pooling_kernels(table);
  register_reduction_kernels(table);
  register_gemm_kernels(table);
  register_conv_kernels(table);
  register_batch_norm_kernels(table);
  register_sgd_kernels(table);
}

}  // namespace ember::cpu::CPU_CAPABILITY
