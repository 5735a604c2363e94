#include "tensor/cpu/capability.h"
#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu {

KernelTable make_kernel_table() {
  KernelTable table;
  switch (cpu_capability_level()) {
#ifndef EMBER_NO_AVX512_KERNELS  // Note [Sanitizer builds compile the levels the CPU runs]
    case CpuCapability::Avx512: AVX512::register_kernels(table); break;
#else
    case CpuCapability::Avx512:  // not linked; cpu_capability_level() never returns it
#endif
    case CpuCapability::Avx2: AVX2::register_kernels(table); break;
    case CpuCapability::Default: DEFAULT::register_kernels(table); break;
  }
  return table;
}

}  // namespace ember::cpu
