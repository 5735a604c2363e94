"""torch.distributed gloo allreduce on the sizes of allreduce_bench.cc (2 processes, median per call).

Usage: /usr/bin/python3 bench/allreduce_bench_gloo.py [rounds]
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def run(rank, rounds, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    if rank == 0:
        print(f"gloo allreduce float32 SUM, {WORLD} processes, median per call (slowest rank), "
              f"{rounds} rounds")
        print(f"{'size':<8} {'gloo_us':>12} {'gloo_busGB/s':>13}")
    nbytes = 1024
    while nbytes <= 64 << 20:
        t = torch.zeros(nbytes // 4)
        iters = max(5, min(2000, (256 << 20) // nbytes))
        times = []
        for r in range(rounds + 1):
            dist.barrier()
            for _ in range(iters):
                start = time.perf_counter()
                dist.all_reduce(t)
                if r > 0:
                    times.append((time.perf_counter() - start) * 1e6)
        med = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        us = med.item()
        bus = nbytes / (us * 1e-6) * (2 * (WORLD - 1) / WORLD) / 1e9
        if rank == 0:
            size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
            print(f"{size:<8} {us:12.1f} {bus:13.3f}", flush=True)
        nbytes *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    port = 29500 + os.getpid() % 1000
    mp.spawn(run, args=(rounds, port), nprocs=WORLD, join=True)
