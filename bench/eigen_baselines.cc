#include "bench/eigen_baselines.h"

#include "tensor/cpu/capability.h"
#include "tensor/error.h"

namespace ember::bench {
// Note [Builds that compile fewer capability levels] (tensor/cpu_kernels.bzl): only the linked
// levels are named, and cpu_capability_level() chooses one of them.
namespace DEFAULT { extern const EigenBaselines kEigenBaselines; }
namespace AVX2 { extern const EigenBaselines kEigenBaselines; }
namespace AVX512 { extern const EigenBaselines kEigenBaselines; }

const EigenBaselines& eigen_baselines() {
  switch (cpu_capability_level()) {
#ifndef EMBER_NO_AVX512_KERNELS
    case CpuCapability::kAvx512: return AVX512::kEigenBaselines;
#endif
#ifndef EMBER_NO_AVX2_KERNELS
    case CpuCapability::kAvx2: return AVX2::kEigenBaselines;
#endif
#ifndef EMBER_NO_DEFAULT_KERNELS
    case CpuCapability::kDefault: return DEFAULT::kEigenBaselines;
#endif
    default: break;
  }
  EMBER_THROW("eigen_baselines: no baseline linked for CPU level ", cpu_capability());
}

}  // namespace ember::bench
