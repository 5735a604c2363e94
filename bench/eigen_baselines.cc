#include "bench/eigen_baselines.h"

#include "tensor/cpu/capability.h"

namespace ember::bench {
namespace DEFAULT { extern const EigenBaselines kEigenBaselines; }
namespace AVX2 { extern const EigenBaselines kEigenBaselines; }
namespace AVX512 { extern const EigenBaselines kEigenBaselines; }

const EigenBaselines& eigen_baselines() {
  switch (cpu_capability_level()) {
    case CpuCapability::Avx512: return AVX512::kEigenBaselines;
    case CpuCapability::Avx2: return AVX2::kEigenBaselines;
    case CpuCapability::Default: break;
  }
  return DEFAULT::kEigenBaselines;
}

}  // namespace ember::bench
