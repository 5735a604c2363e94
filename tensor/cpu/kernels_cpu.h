// Internal to tensor/: the CPU kernel families, compiled once per capability level (Note [CPU
// capability namespaces]); each fills its slots of the CPU KernelTable.
#pragma once

#include "tensor/cpu/capability_namespace.h"
#include "tensor/kernels.h"

#define EMBER_DECLARE_CPU_KERNELS(level)                \
  namespace ember::cpu::level {                         \
  void register_elementwise_kernels(KernelTable& table); \
  void register_copy_kernels(KernelTable& table);        \
  void register_indexing_kernels(KernelTable& table);    \
  void register_random_kernels(KernelTable& table);      \
  void register_pooling_kernels(KernelTable& table);     \
  void register_reduction_kernels(KernelTable& table);   \
  void register_gemm_kernels(KernelTable& table);        \
  void register_conv_kernels(KernelTable& table);        \
  void register_batch_norm_kernels(KernelTable& table);  \
  void register_sgd_kernels(KernelTable& table);         \
  void register_kernels(KernelTable& table);             \
  }

EMBER_DECLARE_CPU_KERNELS(DEFAULT)
EMBER_DECLARE_CPU_KERNELS(AVX2)
EMBER_DECLARE_CPU_KERNELS(AVX512)
#undef EMBER_DECLARE_CPU_KERNELS
