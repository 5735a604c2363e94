#include "tensor/cpu/capability.h"
#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu {

KernelTable make_kernel_table() {
  KernelTable table;
  switch (cpu_capability_level()) {
    case CpuCapability::Avx512: AVX512::register_kernels(table); break;
    case CpuCapability::Avx2: AVX2::register_kernels(table); break;
    case CpuCapability::Default: DEFAULT::register_kernels(table); break;
  }
  return table;
}

}  // namespace ember::cpu
