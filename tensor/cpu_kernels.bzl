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

# Note [Builds that compile fewer capability levels]
# `--define=cpu_kernel_levels=V` links only some levels; without it (or with `all`) every level is
# compiled and linked, as a user's build and scripts/test.sh's plain tier do. scripts/test.sh uses:
#   default_avx2   the sanitizer tiers on a CPU without x86-64-v4: code the CPU cannot run cannot
#                  be checked by a sanitizer there;
#   avx512|avx2|default   one level, the highest this CPU runs, where nothing asks for another:
#                  the TSan tier (it runs no per-level op suite) and the workspace tier's build of
#                  ember as an external repository (it checks the workspace, not the kernels).
# Each level is about a third of the kernels' compile time (`EMBER_PROFILE=DIR scripts/test.sh
# --all`, then `scripts/top_actions.py DIR/<tier>.profile.gz --build_only`; bench/README.md, "Test
# tiers"). `name` then links the chosen levels only; the code that names a level's namespace
# (tensor/cpu/kernel_table.cc, tensor/cpu/capability.cc, bench/eigen_baselines.cc) is compiled
# with CPU_LEVEL_DEFINES, and cpu_capability_level() never chooses a level that is not linked.
CPU_KERNEL_LEVEL_CHOICES = {
    # --define value: the levels linked
    "all": ["DEFAULT", "AVX2", "AVX512"],
    "default_avx2": ["DEFAULT", "AVX2"],
    "default": ["DEFAULT"],
    "avx2": ["AVX2"],
    "avx512": ["AVX512"],
}

def _levels_select(values):
    """select() over the cpu_kernel_levels choices from {choice: value}, `all` the default."""
    return select(dict(
        [("//tensor:cpu_kernel_levels_" + c, v) for c, v in values.items() if c != "all"] +
        [("//conditions:default", values["all"])],
    ))

# EMBER_NO_<LEVEL>_KERNELS for each level left out.
CPU_LEVEL_DEFINES = _levels_select({
    choice: ["EMBER_NO_%s_KERNELS" % l for l in CPU_CAPABILITY_COPTS if l not in linked]
    for choice, linked in CPU_KERNEL_LEVEL_CHOICES.items()
})

def cpu_kernel_level_settings():
    """The config_settings `cpu_kernel_levels_<choice>` (tensor/BUILD declares them)."""
    for choice in CPU_KERNEL_LEVEL_CHOICES:
        if choice != "all":
            native.config_setting(
                name = "cpu_kernel_levels_" + choice,
                define_values = {"cpu_kernel_levels": choice},
                visibility = ["//:internal"],
            )

def cpu_kernel_libraries(name, srcs, deps = [], **kwargs):
    """One cc_library per level, `<name>_<level>`, and `name` depending on those that
    --define=cpu_kernel_levels links (all of them by default)."""
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
    native.cc_library(
        name = name,
        deps = _levels_select({
            choice: [":%s_%s" % (name, l.lower()) for l in linked]
            for choice, linked in CPU_KERNEL_LEVEL_CHOICES.items()
        }),
        **kwargs
    )
