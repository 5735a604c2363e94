"""Op suites run once per CPU capability level (Note [CPU capability namespaces])."""

load("//:ember.bzl", "ember_cc_test", "ember_test_cc_library")

CPU_CAPABILITY_LEVELS = ["default", "avx2", "avx512"]

def cpu_capability_tests(name, srcs, deps = [], **kwargs):
    """`<name>_<level>` for each level, with EMBER_CPU_CAPABILITY=<level>; levels the CPU lacks
    skip. `name` is a test_suite of them. The sources compile once, into `<name>_cases`: the level
    is chosen at run time, so the three binaries differ only in their environment."""
    ember_test_cc_library(
        name = name + "_cases",
        srcs = srcs,
        deps = deps + ["//third_party:gtest_main"],
        alwayslink = True,
    )
    tests = []
    for level in CPU_CAPABILITY_LEVELS:
        ember_cc_test(
            name = name + "_" + level,
            env = {"EMBER_CPU_CAPABILITY": level},
            deps = [":" + name + "_cases", "//tests/common:cpu_capability_environment"],
            **kwargs
        )
        tests.append(":" + name + "_" + level)
    native.test_suite(name = name, tests = tests)
