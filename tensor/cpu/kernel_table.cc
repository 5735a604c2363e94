#include "tensor/cpu/capability.h"
#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu {

KernelTable make_kernel_table() {
  KernelTable table;
  switch (cpu_capability_level()) {
#ifndef EMBER_NO_AVX512_KERNELS  // Note [Sanitizer builds compile the levels the CPU runs]
    case CpuCapability::kAvx512: AVX512::register_kernels(table); break;
#else
    case CpuCapability::kAvx512:  // not linked; cpu_capability_level() never returns it
#endif
    case CpuCapability::kAvx2: AVX2::register_kernels(table); break;
    case CpuCapability::kDefault: DEFAULT::register_kernels(table); break;
  }
  return table;
}

}  // namespace ember::cpu
