#include "tensor/cpu/capability.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/linked_levels.h"

namespace ember::cpu {

KernelTable make_kernel_table() {
  KernelTable table;
  // Only linked levels have a case: cpu_capability_level() chooses one of them.
  switch (cpu_capability_level()) {
#define EMBER_REGISTER_LEVEL(enumerator, ns) \
  case CpuCapability::enumerator: ns::register_kernels(table); break;
    EMBER_FOR_EACH_LINKED_CPU_LEVEL(EMBER_REGISTER_LEVEL)
#undef EMBER_REGISTER_LEVEL
    default: break;
  }
  return table;
}

}  // namespace ember::cpu
