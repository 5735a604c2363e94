"""Shared compiler options for ember's own code (third-party code does not get -Werror)."""

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

def ember_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = EMBER_COPTS + copts, **kwargs)

def ember_cc_test(name, deps = [], copts = [], **kwargs):
    native.cc_test(
        name = name,
        copts = EMBER_COPTS + copts,
        deps = deps + ["//third_party:gtest_main"],
        **kwargs
    )

def ember_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = EMBER_COPTS + copts, **kwargs)
