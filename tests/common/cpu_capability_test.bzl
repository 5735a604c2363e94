"""Op suites run once per CPU capability level (Note [CPU capability namespaces])."""

load("//:ember.bzl", "ember_cc_test")

CPU_CAPABILITY_LEVELS = ["default", "avx2", "avx512"]

def cpu_capability_tests(name, deps = [], **kwargs):
    """`<name>_<level>` for each level, with EMBER_CPU_CAPABILITY=<level>; levels the CPU lacks
    skip. `name` is a test_suite of them."""
    tests = []
    for level in CPU_CAPABILITY_LEVELS:
        ember_cc_test(
            name = name + "_" + level,
            env = {"EMBER_CPU_CAPABILITY": level},
            deps = deps + ["//tests/common:cpu_capability_environment"],
            **kwargs
        )
        tests.append(":" + name + "_" + level)
    native.test_suite(name = name, tests = tests)
