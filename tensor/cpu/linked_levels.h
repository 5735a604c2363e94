// The CPU capability levels this build linked (Note [Builds that compile fewer capability levels],
// tensor/cpu_kernels.bzl), as an X-macro: X(enumerator, namespace) for each, highest first. Only
// files compiled with CPU_LEVEL_DEFINES may include it: elsewhere it would list every level.
#pragma once

#ifndef EMBER_NO_AVX512_KERNELS
#define EMBER_LINKED_AVX512(X) X(kAvx512, AVX512)
#else
#define EMBER_LINKED_AVX512(X)
#endif
#ifndef EMBER_NO_AVX2_KERNELS
#define EMBER_LINKED_AVX2(X) X(kAvx2, AVX2)
#else
#define EMBER_LINKED_AVX2(X)
#endif
#ifndef EMBER_NO_DEFAULT_KERNELS
#define EMBER_LINKED_DEFAULT(X) X(kDefault, DEFAULT)
#else
#define EMBER_LINKED_DEFAULT(X)
#endif

#define EMBER_FOR_EACH_LINKED_CPU_LEVEL(X) \
  EMBER_LINKED_AVX512(X)                   \
  EMBER_LINKED_AVX2(X)                     \
  EMBER_LINKED_DEFAULT(X)
