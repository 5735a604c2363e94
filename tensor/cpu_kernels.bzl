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

# Note [Sanitizer builds compile the levels the CPU runs]
# scripts/test.sh builds its sanitizer tiers with --define=avx512_kernels=false on a CPU without
# x86-64-v4: code the CPU cannot run cannot be checked by a sanitizer there, and the AVX-512 copies
# of the kernels are a third of the kernels' compile time (each file's time: `EMBER_PROFILE=DIR
# scripts/test.sh --all`, then `scripts/top_actions.py DIR/asan.profile.gz --build_only`; the
# figures: docs/measurements.md, "Compile time"). `name` then links the DEFAULT and AVX2 levels
# only; the code that names the AVX512 namespace (tensor/cpu/kernel_table.cc,
# bench/eigen_baselines.cc) is compiled with CPU_LEVEL_DEFINES, and cpu_capability_supported()
# never reports a level that is not linked.
CPU_LEVEL_DEFINES = select({
    "//tensor:no_avx512_kernels": ["EMBER_NO_AVX512_KERNELS"],
    "//conditions:default": [],
})

def cpu_kernel_libraries(name, srcs, deps = [], **kwargs):
    """One cc_library per level, `<name>_<level>`, and `name` depending on all of them (on the
    DEFAULT and AVX2 ones under --define=avx512_kernels=false)."""
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
    native.cc_library(
        name = name,
        deps = select({
            "//tensor:no_avx512_kernels": [l for l in levels if not l.endswith("_avx512")],
            "//conditions:default": levels,
        }),
        **kwargs
    )
