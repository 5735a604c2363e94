// Note [CPU capability namespaces]
// The files in CPU_KERNEL_SRCS (tensor/BUILD) are compiled once per capability level with that
// level's -march, and CPU_CAPABILITY names the level (DEFAULT, AVX2, AVX512). Their code, and the
// templates they instantiate (loops.h, convert.h), live in namespace ember::cpu::CPU_CAPABILITY,
// and Eigen is renamed Eigen_<level> there (-DEigen=...). Without that, the linker, which keeps
// one copy of each inline function and template instantiation, could hand AVX-512 code to a
// caller on a CPU without AVX-512. tests/tensor/cpu_capability_symbols_test.sh checks the built
// objects: every symbol an AVX2/AVX-512 object shares with the rest of the program is either
// named by its level or made of baseline x86-64 instructions only.
#pragma once

#ifndef CPU_CAPABILITY
#define CPU_CAPABILITY DEFAULT  // files outside CPU_KERNEL_SRCS: baseline code
#endif
