"""CPU kernels compiled once per capability level (Note [CPU capability namespaces])."""

load("//:ember.bzl", "EMBER_COPTS")

# Level -> compiler flags. The levels are the x86-64 micro-architecture levels that
# tensor/cpu/capability.cc checks with __builtin_cpu_supports before choosing one.
CPU_CAPABILITY_COPTS = {
    "DEFAULT": ["-march=x86-64", "-mtune=generic"],
    "AVX2": ["-march=x86-64-v3", "-mtune=generic"],
    # Eigen picks 16-float packets from __AVX512F__; let GCC's own loops use zmm too.
    # GCC 12 reports false (maybe-)uninitialized warnings inside its own avx512fintrin.h.
    "AVX512": [
        "-march=x86-64-v4",
        "-mtune=generic",
        "-mprefer-vector-width=512",
        "-Wno-maybe-uninitialized",
        "-Wno-uninitialized",
    ],
}

def cpu_kernel_libraries(name, srcs, deps = [], **kwargs):
    """One cc_library per level, `<name>_<level>`, and `name` depending on all of them."""
    levels = []
    for level, flags in CPU_CAPABILITY_COPTS.items():
        lib = name + "_" + level.lower()
        native.cc_library(
            name = lib,
            srcs = srcs,
            copts = EMBER_COPTS + flags + [
                "-DCPU_CAPABILITY=" + level,
                "-DEigen=Eigen_" + level,
                # Threads come from ember's parallel_for (tensor/parallel.h), never from Eigen.
                "-DEIGEN_DONT_PARALLELIZE",
            ],
            deps = deps,
            **kwargs
        )
        levels.append(":" + lib)
    native.cc_library(name = name, deps = levels, **kwargs)
