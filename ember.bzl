"""Shared compiler options for ember's own code (third-party code does not get -Werror)."""

load("//tests/common:precompiled_header.bzl", "with_test_precompiled_header")

EMBER_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
    "-Wno-missing-field-initializers",
    # GCC 12 at -O3 reports false positives inside fmt and libstdc++ headers.
    "-Wno-stringop-overflow",
    "-Wno-stringop-overread",
    "-Wno-array-bounds",
    # Intra-op threads (tensor/parallel.h); the :tensor library links libgomp.
    "-fopenmp",
]

# Note [Test sources compile at a low optimisation level]
# Test sources (tests/**) check the libraries, which keep -O3 (-O1 under the sanitizers); their own
# code only builds inputs and compares results. They compile at -O1, and at -O0 under the
# sanitizers, where UBSan's checks make -O1 cost most (elementwise_test.cc: 29 s at -O1, 11 s at
# -O0 under ASan+UBSan; 17 s at -O3, 10 s at -O1 plain): CI compiles a test up to three times
# (plain, ASan, TSan). They also leave out UBSan (-fno-sanitize=undefined; the ASan tier adds
# it): it checks the libraries' own sources, and on the test sources it made compiling about 30 %
# slower (six DDP and autograd suites: 51.5 s with it, 35.3 s without). An inline function of a
# library header that the linker takes from a test's object is then compiled without its checks.
EMBER_TEST_COPTS = EMBER_COPTS + select({
    "//third_party:sanitizer_build": ["-O0", "-fno-sanitize=undefined"],
    "//conditions:default": ["-O1"],
})

def ember_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = EMBER_COPTS + copts, **kwargs)

def ember_test_compile(deps, copts = []):
    """(deps, copts) of test sources in the calling package: EMBER_TEST_COPTS (Note [Test sources
    compile at a low optimisation level]) and the package's precompiled header (Note [Precompiled
    headers for the tests]), for ember_cc_test, ember_test_cc_library and mpi_test."""
    return with_test_precompiled_header(deps, EMBER_TEST_COPTS + copts)

def ember_test_cc_library(name, deps = [], copts = [], **kwargs):
    """A testonly library of test code (ember_test_compile)."""
    deps, copts = ember_test_compile(deps, copts)
    native.cc_library(name = name, deps = deps, copts = copts, testonly = True, **kwargs)

def ember_cc_test(name, deps = [], copts = [], **kwargs):
    """A GoogleTest suite (ember_test_compile)."""
    deps, copts = ember_test_compile(deps + ["//third_party:gtest_main"], copts)
    native.cc_test(name = name, copts = copts, deps = deps, **kwargs)

def ember_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = EMBER_COPTS + copts, **kwargs)

# Note [The CUDA backend is linked, not compiled against]
# The CUDA backend and the NCCL process group register themselves from static initialisers, and
# no header outside them includes theirs. //:ember takes them through cc_link_only, which passes
# on their libraries and runfiles but not their compilation context: the CUDA toolkit's (or the
# simulator's) include paths and headers would otherwise become inputs of every compile action
# that depends on //:ember, and --config=cuda or --config=cudasim would compile every example,
# benchmark and test again instead of only the CUDA code and the suites that include it.
def _cc_link_only_impl(ctx):
    runfiles = ctx.runfiles()
    for dep in ctx.attr.deps:
        runfiles = runfiles.merge(dep[DefaultInfo].default_runfiles)
    return [
        cc_common.merge_cc_infos(
            cc_infos = [CcInfo(linking_context = dep[CcInfo].linking_context) for dep in ctx.attr.deps],
        ),
        DefaultInfo(runfiles = runfiles),
    ]

cc_link_only = rule(
    implementation = _cc_link_only_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
    doc = "The deps' libraries (alwayslink kept) and runfiles, without their headers or include paths.",
)
