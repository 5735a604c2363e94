"""CUDA build rules: cuda_library compiles .cu files with nvcc (--config=cuda) or, unchanged, with
the host compiler against the CUDA simulator (--config=cudasim); without either it is empty.

The nvcc genrules are incompatible with the default configuration, so `bazel build //...` skips
them and never needs a CUDA toolkit, while `bazel build --config=cuda //...` builds them.
"""

load("//:ember.bzl", "EMBER_COPTS")

# sm_90 (H100/H200) machine code; compute_90 PTX as well, so a newer GPU can JIT it.
CUDA_GENCODE = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

_REAL = "//third_party:cuda_enabled"
_SIM = "//third_party:cuda_simulated"

CUDA_ONLY = select({
    _REAL: [],
    "//conditions:default": ["@platforms//:incompatible"],
})

def if_cuda_backend(if_true, if_false = []):
    """`if_true` when the CUDA backend is built (real or simulated), else `if_false`."""
    return select({
        _REAL: if_true,
        _SIM: if_true,
        "//conditions:default": if_false,
    })

# Under --config=cudasim the kernels are compiled with ThreadSanitizer's instrumentation, whose
# hooks are the simulator's checks (Note [Simulated compute-sanitizer], sim/cuda/checks.cc);
# not under a host sanitizer, whose own instrumentation it would clash with.
CUDA_SIMULATOR_CHECK_COPTS = select({
    "//third_party:cuda_simulated_sanitizer_build": [],
    _SIM: [
        "-fsanitize=thread",
        "--param=tsan-instrument-func-entry-exit=0",
    ],
    "//conditions:default": [],
})

# What code built for the CUDA backend links against: the toolkit, or the simulator's runtime.
CUDA_RUNTIME_DEPS = select({
    _REAL: ["@cuda"],
    _SIM: ["//sim/cuda:runtime"],
    "//conditions:default": [],
})

def cuda_object(name, src, hdrs = [], copts = []):
    """Compiles `src` into `<name>.pic.o` with nvcc; `hdrs` are the headers it includes."""
    out = name + ".pic.o"

    # This repository's root in the execroot: "." here, external/<name> in a workspace that
    # depends on ember (examples/out_of_tree/WORKSPACE).
    repo = native.repository_name().lstrip("@")
    root = "external/" + repo if repo else "."
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = [out],
        tools = ["@cuda//:nvcc_bin"],
        # nvcc locates cicc, ptxas and its headers relative to its real path, hence readlink -f.
        # -I<root> lets the .cu include "tensor/cuda/launch.h" like every other ember file.
        cmd = " ".join([
            "$$(readlink -f $(execpath @cuda//:nvcc_bin))",
            "-c $(location {})".format(src),
            "-o $@",
            "-std=c++17 -O3 -I{root} -I$(GENDIR)/{root}".format(root = root),
            "-Xcompiler -fPIC -Xcompiler -march=x86-64-v3",
            "-Xcompiler -Wall -Werror=all-warnings",
        ] + CUDA_GENCODE + copts),
        target_compatible_with = CUDA_ONLY,
        visibility = ["//visibility:private"],
    )
    return ":" + name

def cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """A cc_library of .cu files: nvcc objects under --config=cuda; under --config=cudasim the
    same sources, copied to .cc (with a #line naming the .cu) and compiled by the host compiler."""
    objects = []
    simulated = []
    for src in srcs:
        stem = src[:-len(".cu")]
        objects.append(cuda_object(name = name + "_" + stem + "_nvcc", src = src, hdrs = hdrs))
        native.genrule(
            name = name + "_" + stem + "_sim",
            srcs = [src],
            outs = [stem + ".sim.cc"],
            cmd = "(echo '#line 1 \"$(location {src})\"'; cat $(location {src})) > $@".format(src = src),
            visibility = ["//visibility:private"],
        )
        simulated.append(":" + stem + ".sim.cc")
    native.cc_library(
        name = name,
        srcs = select({_REAL: objects, _SIM: simulated, "//conditions:default": []}),
        hdrs = hdrs,
        copts = EMBER_COPTS + CUDA_SIMULATOR_CHECK_COPTS,
        deps = deps + CUDA_RUNTIME_DEPS,
        **kwargs
    )
