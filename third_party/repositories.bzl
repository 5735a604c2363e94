"""Bazel glue for the Debian-installed libraries, so the build works offline.

Each library is a local repository over the files apt installed; nothing is downloaded. A workspace
of one's own that depends on ember (examples/out_of_tree/WORKSPACE) calls the same two functions
after its local_repository(name = "ember"): ember_bazel_repositories() for the rules Bazel itself
wants, ember_dependencies() for the libraries.
"""

def _third_party_copy_impl(ctx):
    # third_party/<folder> of this repository, wherever it is checked out, linked entry by entry: a
    # local_repository's relative path would be relative to the main workspace, not to ember.
    folder = ctx.path(Label("//third_party:BUILD")).dirname.get_child(ctx.attr.folder)
    for entry in folder.readdir():
        ctx.symlink(entry, entry.basename)

_third_party_copy = repository_rule(
    implementation = _third_party_copy_impl,
    attrs = {"folder": attr.string(mandatory = True)},
    local = True,
)

def ember_bazel_repositories():
    """The repositories Bazel 4.2 would otherwise download, from Debian's packages and this repository."""
    native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
    native.local_repository(name = "platforms", path = "/usr/share/bazel/tools/platforms")

    # Debian's bazel-rules-cc does not load under Bazel 4.2.3; ours re-exports the native rules.
    _third_party_copy(name = "rules_cc", folder = "rules_cc")

    # Bazel wants this repository for `bazel test`; offline it only needs two empty filegroups.
    _third_party_copy(name = "remote_coverage_tools", folder = "remote_coverage_tools")

def _system_headers_repository(name, path, prefix, linkopts, hdrs_glob = ["**/*.h"]):
    # Headers under /usr/include/<prefix> are exposed as <prefix>/... so Bazel's inclusion check sees them.
    native.new_local_repository(
        name = name,
        path = path,
        build_file_content = """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "{name}",
    hdrs = glob({hdrs_glob}),
    include_prefix = "{prefix}",
    linkopts = {linkopts},
)
""".format(name = name, hdrs_glob = hdrs_glob, prefix = prefix, linkopts = linkopts),
    )

def _mpi_repository_impl(ctx):
    # Flags come from the MPI compiler wrapper itself, as `mpicxx --showme` reports them.
    mpicxx = ctx.which("mpicxx")
    if mpicxx == None:
        fail("mpicxx not found: install libopenmpi-dev and openmpi-bin (scripts/bootstrap.sh does)")
    compile = ctx.execute([mpicxx, "--showme:incdirs"])
    link = ctx.execute([mpicxx, "--showme:link"])
    if compile.return_code != 0 or link.return_code != 0:
        fail("mpicxx --showme failed: " + compile.stderr + link.stderr)
    incdirs = compile.stdout.strip().split(" ")
    includes = []
    for i, d in enumerate(incdirs):
        ctx.symlink(d, "include%d" % i)
        includes.append("include%d" % i)

    # The C++ bindings are deprecated and unused; skipping them avoids linking -lmpi_cxx.
    linkopts = [f for f in link.stdout.strip().split(" ") if f != "-lmpi_cxx"]

    # Note [The slow unwinder for processes that link Open MPI]
    # Open MPI's libraries are built without frame pointers, so ASan's fast unwinder loses a leak's
    # stack inside them, and tests/sanitizers/lsan.supp, which names them, could not match it.
    # Every program that links MPI asks for the slow unwinder in its ASan build; the other suites
    # keep the fast one, as the slow one walks the stack on every malloc. ASAN_OPTIONS can still
    # say otherwise.
    ctx.file(
        "asan_default_options.cc",
        'extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }\n',
    )
    sanitizer_build = str(Label("//third_party:sanitizer_build"))
    if sanitizer_build.startswith("//"):  # this repository is the main one: name it from @mpi
        sanitizer_build = "@" + sanitizer_build
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "mpi",
    srcs = select({{
        "{sanitizer_build}": ["asan_default_options.cc"],
        "//conditions:default": [],
    }}),
    hdrs = glob(["include*/**/*.h"]),
    includes = {includes},
    defines = ["OMPI_SKIP_MPICXX"],
    linkopts = {linkopts} + ["-pthread"],
    # The options must be in the executable: libasan's own weak default would win over a shared
    # library's, which the dynamic linker finds after it.
    alwayslink = True,
    linkstatic = True,
)
""".format(includes = includes, linkopts = linkopts, sanitizer_build = sanitizer_build))

_mpi_repository = repository_rule(
    implementation = _mpi_repository_impl,
    local = True,
    environ = ["PATH"],
)

def _cuda_repository_impl(ctx):
    # CUDA is optional: without /usr/local/cuda the repository exists but refuses to build,
    # so the default (CPU-only) build never needs it.
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    if not ctx.path(root + "/bin/nvcc").exists:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo '--config=cuda needs the CUDA toolkit at {root} (or set CUDA_PATH)' >&2; exit 1",
)
cc_library(name = "cuda", hdrs = [":missing"])
filegroup(name = "nvcc", srcs = [":missing"])
filegroup(name = "nvcc_bin", srcs = [":missing"])
""".format(root = root))
        return
    for d in ["bin", "include", "lib64", "lib", "nvvm"]:
        if ctx.path(root + "/" + d).exists:
            ctx.symlink(root + "/" + d, d)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
filegroup(name = "nvcc", srcs = glob(["bin/**", "nvvm/**", "include/**"]))
# The compiler driver alone, for genrules (third_party/cuda.bzl); it finds its toolkit itself.
filegroup(name = "nvcc_bin", srcs = ["bin/nvcc"])
cc_library(
    name = "cuda",
    # Every file under include/: some headers have no extension (nv/target, from CCCL).
    hdrs = glob(["include/**"]),
    includes = ["include"],
    linkopts = ["-L{root}/lib64", "-L{root}/lib", "-Wl,-rpath,{root}/lib64", "-Wl,-rpath,{root}/lib",
                "-lcudart", "-lcublas", "-lnccl"],
)
""".format(root = root))

_cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    local = True,
    environ = ["CUDA_PATH"],
)

def ember_dependencies():
    native.new_local_repository(
        name = "eigen",
        path = "/usr/include/eigen3",
        build_file_content = """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "eigen",
    hdrs = glob(["Eigen/**", "unsupported/Eigen/**"]),
    includes = ["."],
    defines = ["EIGEN_NO_DEBUG"],
)
""",
    )
    _system_headers_repository("fmt", "/usr/include/fmt", "fmt", ["-lfmt"])
    _system_headers_repository("gtest", "/usr/include/gtest", "gtest", ["-lgtest", "-pthread"])
    _system_headers_repository("gmock", "/usr/include/gmock", "gmock", ["-lgmock", "-lgtest", "-pthread"])
    _system_headers_repository("benchmark", "/usr/include/benchmark", "benchmark", ["-lbenchmark", "-pthread"])
    # nlohmann-json3-dev: header-only; included as <nlohmann/json.hpp>.
    _system_headers_repository("nlohmann_json", "/usr/include/nlohmann", "nlohmann", [], ["**/*.hpp"])
    # libcli11-dev: header-only command-line parser; included as <CLI/CLI.hpp> by examples/common/flags.cc
    # alone (Note [CLI11 compiles in one translation unit], examples/common/flags.h).
    _system_headers_repository("cli11", "/usr/include/CLI", "CLI", [], ["**/*.hpp"])
    native.new_local_repository(
        name = "zlib",
        path = "/usr/include",
        build_file_content = """
package(default_visibility = ["//visibility:public"])
cc_library(name = "zlib", hdrs = ["zlib.h", "zconf.h"], linkopts = ["-lz"])
""",
    )
    _mpi_repository(name = "mpi")
    _cuda_repository(name = "cuda")
