#include "bench/eigen_baselines.h"

#include "tensor/cpu/capability.h"

namespace ember::bench {
namespace DEFAULT { extern const EigenBaselines kEigenBaselines; }
namespace AVX2 { extern const EigenBaselines kEigenBaselines; }
#ifndef EMBER_NO_AVX512_KERNELS  // Note [Sanitizer builds compile the levels the CPU runs]
namespace AVX512 { extern const EigenBaselines kEigenBaselines; }
#endif

const EigenBaselines& eigen_baselines() {
  switch (cpu_capability_level()) {
#ifndef EMBER_NO_AVX512_KERNELS
    case CpuCapability::kAvx512: return AVX512::kEigenBaselines;
#else
    case CpuCapability::kAvx512:  // not linked; cpu_capability_level() never returns it
#endif
    case CpuCapability::kAvx2: return AVX2::kEigenBaselines;
    case CpuCapability::kDefault: break;
  }
  return DEFAULT::kEigenBaselines;
}

}  // namespace ember::bench
