"""mpi_test: a GoogleTest binary run under `mpirun -np N` for several N, one sh_test per N.

    mpi_test(name = "collectives_test", srcs = [...], deps = [...], ranks = [1, 2, 3, 4])

creates `collectives_test_bin` (linked with //tests/distributed:mpi_test_main, which initialises MPI
and lets only rank 0 write the XML), sh_tests `collectives_test_np1` ... `_np4` tagged "mpi", and a
test_suite `collectives_test` over them. The sanitizer runs (scripts/test.sh) take one world size
per suite, 2 where it has one: the others are also tagged "mpi_extra_ranks".
"""

load("//:ember.bzl", "ember_test_compile")

def mpi_test(name, srcs, deps = [], ranks = [1, 2, 3, 4], tags = [], size = "medium", env = {}, **kwargs):
    binary = name + "_bin"
    bin_deps, copts = ember_test_compile(deps + ["//tests/distributed:mpi_test_main"])
    native.cc_binary(
        name = binary,
        srcs = srcs,
        copts = copts,
        # Linked against the libraries' shared objects, as a cc_test is, rather than statically as a
        # cc_binary is by default: a static binary carries all of ember (~210 MB each under ASan),
        # linked and stored once per suite and configuration, disk cache included.
        linkstatic = False,
        deps = bin_deps,
        testonly = True,
        **kwargs
    )
    tests = []
    sanitized = 2 if 2 in ranks else ranks[0]
    for n in ranks:
        test = "%s_np%d" % (name, n)
        native.sh_test(
            name = test,
            srcs = ["//tests/distributed:mpi_test.sh"],
            args = [str(n), "$(location :%s)" % binary],
            data = [":" + binary],
            tags = tags + ["mpi"] + ([] if n == sanitized else ["mpi_extra_ranks"]),
            size = size,
            env = env,
        )
        tests.append(":" + test)
    native.test_suite(name = name, tests = tests, tags = tags + ["mpi"])

def ddp_mpi_test(name, srcs, deps = [], ranks = [2, 3, 4], **kwargs):
    """An mpi_test of a DDP suite: links the DDP test harness (ddp/ddp_test_util.h) and DDP."""
    mpi_test(
        name = name,
        srcs = srcs,
        ranks = ranks,
        deps = deps + [
            "//tests/distributed:ddp_test_util",
            "//distributed/ddp",
            "//nn",
            "//optim",
            "//tensor",
        ],
        **kwargs
    )
