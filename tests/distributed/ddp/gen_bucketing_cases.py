"""Prints the expected-output table of tests/distributed/ddp/bucketing_test.cc from PyTorch's own
compute_bucket_assignment_by_size (torch 1.13, Debian: /usr/bin/python3 gen_bucketing_cases.py).

Each case: (tensors as (numel, dtype), bucket_size_limits, expect_sparse_gradient, tensor_indices).
"""
import torch, torch.distributed as dist
F, D, H = torch.float32, torch.float64, torch.float16
N = {F: "F", D: "D", H: "H"}
MiB = 1 << 20
cases = {
    "ManySmallF32": ([(n, F) for n in [3, 7, 1, 20, 5, 5, 9, 2, 30, 4, 11, 6]], [64], [], []),
    "ExactLimitClosesBucket": ([(4, F)] * 6 + [(2, D)] * 4, [32], [], []),
    "MixedDtypesTwoLimits": ([(n, [F, D, H][i % 3]) for i, n in enumerate(
        [10, 3, 40, 8, 8, 8, 25, 1, 64, 16, 2, 30, 5, 5, 5])], [48, 128], [], []),
    "ThreeLimits": ([(n, F if i % 4 else H) for i, n in enumerate(
        [16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16])], [32, 64, 128], [], []),
    "LargeAndSmall": ([(n, F) for n in [64, 262144, 64, 300000, 64, 64, 1048576, 64, 16]]
                      + [(n, D) for n in [131072, 8, 8]], [MiB, 4 * MiB], [], []),
    "ResNetLike": ([(n, F) for n in [432, 16, 16] + [2304, 16, 16] * 6 + [4608, 32, 32, 9216, 32, 32]
                    + [9216, 32, 32] * 4 + [18432, 64, 64, 36864, 64, 64] + [36864, 64, 64] * 4
                    + [640, 10]], [1024, 65536], [], []),
    "SparseFlags": ([(n, [F, D][i % 2]) for i, n in enumerate([8, 8, 100, 8, 8, 8, 50, 8])],
                    [64], [False, True, False, False, True, False, True, False], []),
    "SparseFirstAndLast": ([(16, F)] * 5, [32, 1000], [True, False, False, False, True], []),
    "RebuildOrderSingleDtype": ([(n, F) for n in [5, 40, 3, 3, 60, 1, 7, 20]], [64, 128], [],
                                [7, 6, 5, 4, 3, 2, 1, 0]),
    "RebuildOrderPermuted": ([(n, F) for n in [12, 4, 4, 80, 2, 9, 33, 6]], [48], [],
                             [3, 0, 6, 1, 7, 2, 5, 4]),
    "RebuildMixedDtypesLeftovers": ([(n, [F, D, H][i % 3]) for i, n in enumerate(
        [4, 4, 4, 30, 2, 9, 1, 1, 1, 12])], [64, 256], [], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]),
    "RebuildLeftoversFirstSeenKey": ([(20, F), (1, D), (20, F), (1, H), (3, F)], [64], [],
                                     [4, 3, 2, 1, 0]),
    "RebuildWithSparse": ([(n, [F, D][i % 2]) for i, n in enumerate([8, 8, 100, 8, 8, 8])], [64],
                          [False, True, False, False, True, False], [5, 4, 3, 2, 1, 0]),
    "EmptyTensorsZeroLimit": ([(0, F), (4, F), (0, F), (0, D), (3, F)], [0, 8], [], []),
    "EmptyTensorsOnly": ([(0, F), (0, D), (0, F)], [16], [], []),
    "EmptyTensorsAmongOthers": ([(0, F), (8, F), (0, F), (8, F), (0, H), (8, F)], [64], [], []),
    "SingleTensor": ([(1, H)], [1], [], []),
    "LimitsLongerThanNeeded": ([(8, F)] * 3, [16, 32, 64, 128, 256], [], []),
}
def cs(xs):
    return ", ".join(str(x).lower() if isinstance(x, bool) else str(x) for x in xs)


def emit(items, end, indent="     ", width=104):
    """Prints `{items...}` wrapped at `width` columns."""
    line, out = indent + "{", []
    for i, item in enumerate(items):
        piece = item + (", " if i + 1 < len(items) else "")
        if len(line) + len(piece.rstrip()) > width:
            out.append(line.rstrip())
            line = indent + " "
        line += piece
    out.append(line + "}" + end)
    print("\n".join(out))


for name, (specs, limits, sparse, indices) in cases.items():
    tensors = [torch.zeros(n, dtype=d) for n, d in specs]
    buckets, _ = dist._compute_bucket_assignment_by_size(tensors, limits, sparse, indices)
    print(f'    {{"{name}",')
    emit([f"{{{n}, k{N[d]}}}" for n, d in specs], ",")
    print(f"     {{{cs(limits)}}}, {{{cs(sparse)}}}, {{{cs(indices)}}},")
    emit(["{" + cs(b) + "}" for b in buckets], "},")
