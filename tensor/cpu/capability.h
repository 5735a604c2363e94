// Runtime CPU dispatch (PyTorch's CPU_CAPABILITY): the hot kernels in tensor/cpu/ are compiled once
// per capability level and the CPU kernel table is filled, once, from the level chosen here.
// See Note [CPU capability namespaces].
#pragma once

namespace ember {

enum class CpuCapability { kDefault = 0, kAvx2 = 1, kAvx512 = 2 };

// The level the kernels run at: the highest the CPU (and OS) supports, capped by the environment
// variable EMBER_CPU_CAPABILITY=default|avx2|avx512. Chosen on first use and fixed for the process.
CpuCapability cpu_capability_level();
// Its name: "default", "avx2" or "avx512" (what benchmarks print).
const char* cpu_capability();
const char* cpu_capability_name(CpuCapability level);
// The highest level this CPU supports that the build linked (all three unless built with
// --define=cpu_kernel_levels: Note [Builds that compile fewer capability levels]), whatever the
// environment asks for.
CpuCapability cpu_capability_supported();
// The vector extensions the CPU reports, e.g. "sse4.2 avx avx2 fma f16c avx512f ...".
const char* cpu_vector_extensions();

}  // namespace ember
