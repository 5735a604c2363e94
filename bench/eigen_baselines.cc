#include "bench/eigen_baselines.h"

#include "tensor/cpu/capability.h"
#include "tensor/cpu/linked_levels.h"
#include "tensor/error.h"

namespace ember::bench {
namespace DEFAULT { extern const EigenBaselines kEigenBaselines; }
namespace AVX2 { extern const EigenBaselines kEigenBaselines; }
namespace AVX512 { extern const EigenBaselines kEigenBaselines; }

const EigenBaselines& eigen_baselines() {
  switch (cpu_capability_level()) {
#define EMBER_BASELINES_OF_LEVEL(enumerator, ns) \
  case CpuCapability::enumerator: return ns::kEigenBaselines;
    EMBER_FOR_EACH_LINKED_CPU_LEVEL(EMBER_BASELINES_OF_LEVEL)
#undef EMBER_BASELINES_OF_LEVEL
    default: break;
  }
  EMBER_THROW("eigen_baselines: no baseline linked for CPU level ", cpu_capability());
}

}  // namespace ember::bench
