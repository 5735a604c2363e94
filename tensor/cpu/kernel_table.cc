#include "tensor/cpu/capability.h"
#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu {

KernelTable make_kernel_table() {
  KernelTable table;
  // Note [Builds that compile fewer capability levels]: cpu_capability_level() returns a linked
  // level only, so the levels left out have no case.
  switch (cpu_capability_level()) {
#ifndef EMBER_NO_AVX512_KERNELS
    case CpuCapability::kAvx512: AVX512::register_kernels(table); break;
#endif
#ifndef EMBER_NO_AVX2_KERNELS
    case CpuCapability::kAvx2: AVX2::register_kernels(table); break;
#endif
#ifndef EMBER_NO_DEFAULT_KERNELS
    case CpuCapability::kDefault: DEFAULT::register_kernels(table); break;
#endif
    default: break;
  }
  return table;
}

}  // namespace ember::cpu
