#include "tensor/cpu/capability.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "tensor/cpu/linked_levels.h"
#include "tensor/error.h"

namespace ember {
namespace {

bool linked(CpuCapability level) {
#define EMBER_IS_LEVEL(enumerator, ns) \
  if (level == CpuCapability::enumerator) return true;
  EMBER_FOR_EACH_LINKED_CPU_LEVEL(EMBER_IS_LEVEL)
#undef EMBER_IS_LEVEL
  return false;
}

std::string linked_names() {
  std::string names;
  for (CpuCapability level : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (linked(level)) names += (names.empty() ? "" : ", ") + std::string(cpu_capability_name(level));
  }
  return names;
}

// The highest linked level at or below `cap`; `what` says where the cap came from, for the error
// when there is none (a build that links only levels above it).
CpuCapability highest_linked_up_to(CpuCapability cap, const std::string& what) {
  for (int l = static_cast<int>(cap); l >= 0; --l) {
    if (linked(static_cast<CpuCapability>(l))) return static_cast<CpuCapability>(l);
  }
  EMBER_THROW("CPU kernels: this build links the ", linked_names(),
              " level(s) only (--define=cpu_kernel_levels), and ", what, " allows up to ",
              cpu_capability_name(cap));
}

// x86-64-v3 (AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE) and x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) are
// exactly the -march levels the AVX2 and AVX512 kernels are compiled for (tensor/cpu_kernels.bzl).
// libgcc's check includes the OS's XSAVE support for the wider registers.
CpuCapability detect() {
  CpuCapability cpu = CpuCapability::kDefault;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) {
    cpu = CpuCapability::kAvx512;
  } else if (__builtin_cpu_supports("x86-64-v3")) {
    cpu = CpuCapability::kAvx2;
  }
#endif
  return highest_linked_up_to(cpu, std::string("this CPU (") + cpu_vector_extensions() + ")");
}

CpuCapability choose() {
  const CpuCapability supported = cpu_capability_supported();
  const char* env = std::getenv("EMBER_CPU_CAPABILITY");
  if (env == nullptr || *env == '\0') return supported;
  CpuCapability asked;
  if (std::strcmp(env, "default") == 0) {
    asked = CpuCapability::kDefault;
  } else if (std::strcmp(env, "avx2") == 0) {
    asked = CpuCapability::kAvx2;
  } else if (std::strcmp(env, "avx512") == 0) {
    asked = CpuCapability::kAvx512;
  } else {
    EMBER_THROW("EMBER_CPU_CAPABILITY=", env,
                " is not a CPU capability level; use default, avx2 or avx512");
  }
  // As ATEN_CPU_CAPABILITY: the variable lowers the level; it never enables what the CPU lacks.
  if (static_cast<int>(asked) >= static_cast<int>(supported)) return supported;
  return highest_linked_up_to(asked, std::string("EMBER_CPU_CAPABILITY=") + env);
}

}  // namespace

CpuCapability cpu_capability_supported() {
  static const CpuCapability level = detect();
  return level;
}

CpuCapability cpu_capability_level() {
  static const CpuCapability level = choose();
  return level;
}

const char* cpu_capability_name(CpuCapability level) {
  switch (level) {
    case CpuCapability::kDefault: return "default";
    case CpuCapability::kAvx2: return "avx2";
    case CpuCapability::kAvx512: return "avx512";
  }
  return "unknown";
}

const char* cpu_capability() { return cpu_capability_name(cpu_capability_level()); }

const char* cpu_vector_extensions() {
  static const std::string names = [] {
    std::string s;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    // __builtin_cpu_supports takes a string literal, so the list is spelled out.
#define EMBER_CPU_FEATURE(name) \
  if (__builtin_cpu_supports(name)) s += (s.empty() ? "" : " ") + std::string(name);
    EMBER_CPU_FEATURE("sse4.2")
    EMBER_CPU_FEATURE("avx")
    EMBER_CPU_FEATURE("avx2")
    EMBER_CPU_FEATURE("fma")
    EMBER_CPU_FEATURE("f16c")
    EMBER_CPU_FEATURE("avx512f")
    EMBER_CPU_FEATURE("avx512bw")
    EMBER_CPU_FEATURE("avx512dq")
    EMBER_CPU_FEATURE("avx512vl")
    EMBER_CPU_FEATURE("avx512vnni")
    EMBER_CPU_FEATURE("avx512bf16")
#undef EMBER_CPU_FEATURE
#endif
    return s.empty() ? std::string("none") : s;
  }();
  return names.c_str();
}

}  // namespace ember
