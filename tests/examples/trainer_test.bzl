"""trainer_test: an sh_test of the example trainers, `NAME.sh TRAIN_RESNET DDP_RESNET [ARGS]`, sourcing lib.sh.

`data` adds files the script needs, passed after the two binaries as `args` (with $(location)).

The shell scripts run the real binaries under mpirun, so they carry the "mpi" tag.
"""

def trainer_test(name, size = "medium", tags = [], data = [], args = []):
    native.sh_test(
        name = name,
        size = size,
        srcs = [name + ".sh"],
        args = [
            "$(location //examples:train_resnet)",
            "$(location //examples:ddp_resnet)",
        ] + args,
        data = [
            "lib.sh",
            "//examples:ddp_resnet",
            "//examples:train_resnet",
        ] + data,
        tags = ["mpi"] + tags,
    )
