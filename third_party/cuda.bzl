"""cuda_object: compiles one .cu file with nvcc (from @cuda) into a position-independent object.

The object goes into a cc_library's srcs behind select("//third_party:cuda_enabled"); the genrule
itself is incompatible with the default configuration, so `bazel build //...` skips it and never
needs a CUDA toolkit, while `bazel build --config=cuda //...` builds it.
"""

# sm_90 (H100/H200) machine code; compute_90 PTX as well, so a newer GPU can JIT it.
CUDA_GENCODE = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

CUDA_ONLY = select({
    "//third_party:cuda_enabled": [],
    "//conditions:default": ["@platforms//:incompatible"],
})

def cuda_object(name, src, hdrs = [], copts = []):
    """Compiles `src` into `<name>.pic.o` with nvcc; `hdrs` are the headers it includes."""
    out = name + ".pic.o"
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = [out],
        tools = ["@cuda//:nvcc_bin"],
        # nvcc locates cicc, ptxas and its headers relative to its real path, hence readlink -f.
        # -I. lets the .cu include "tensor/cuda/launch.h" like every other ember file.
        cmd = " ".join([
            "$$(readlink -f $(execpath @cuda//:nvcc_bin))",
            "-c $(location {})".format(src),
            "-o $@",
            "-std=c++17 -O3 -I. -I$(GENDIR)",
            "-Xcompiler -fPIC -Xcompiler -march=x86-64-v3",
            "-Xcompiler -Wall -Werror=all-warnings",
        ] + CUDA_GENCODE + copts),
        target_compatible_with = CUDA_ONLY,
        visibility = ["//visibility:private"],
    )
    return ":" + name
