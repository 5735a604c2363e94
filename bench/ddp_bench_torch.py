"""PyTorch twin of bench/ddp_bench.cc: DDP (gloo) training steps, one run per invocation.

Usage: /usr/bin/python3 bench/ddp_bench_torch.py --world 2 --model resnet20|mlp --mode ddp|nosync|single
           [--bucket_cap_mb 25] [--first_bucket_mb 1] [--steps 30] [--warmup 5] [--batch 64]
           [--mlp_sizes 784,4096,4096,10] [--comm_hook none|allreduce|fp16|bf16|noop|powersgd|batched_powersgd]
           [--powersgd_rank 1] [--powersgd_start_iter 2] [--device cpu|cuda] [--backend gloo|nccl]
Spawns `world` processes (torch.multiprocessing, MASTER_ADDR=127.0.0.1, gloo, one thread each),
same models (torch_models.py), same modes and the same RESULT line as ddp_bench.cc: the step time
is the slowest rank's median. --first_bucket_mb sets dist._DEFAULT_FIRST_BUCKET_BYTES (PyTorch's
first-bucket size, 1 MiB by default) before DDP is built. --comm_hook registers PyTorch's own hook
(torch.distributed.algorithms.ddp_comm_hooks); bytes_per_step is the size of the buffers handed to
gloo, counted by wrapping dist.all_reduce / all_gather for the timed steps. --device cuda puts each
rank on GPU (rank mod device count) with NCCL by default (bench/gpu_bench.sh ddp); steps are timed to
torch.cuda.synchronize() and peak_device_mb is torch.cuda.max_memory_allocated.
--rank R --master_addr A --master_port P runs only rank R, in this process (bench/cluster_bench.sh
starts one per host of scripts/cluster.sh); gloo then uses the interface GLOO_SOCKET_IFNAME names.
"""
import argparse
import faulthandler
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


DEVICE = torch.device("cpu")


def max_over_ranks(x):
    t = torch.tensor([float(x)], dtype=torch.float64, device=DEVICE)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


class PayloadCounter:
    """Counts the bytes of the tensors this rank hands to collectives (like ember's payload_bytes).
    PyTorch's hooks call torch.distributed.all_reduce, the default path calls the C++ reducer,
    whose bucket sizes are added from the model's gradients instead (see run())."""

    def __init__(self):
        self.bytes = 0
        self._all_reduce = dist.all_reduce

    def install(self):
        def counted(tensor, *args, **kwargs):
            self.bytes += tensor.numel() * tensor.element_size()
            return self._all_reduce(tensor, *args, **kwargs)
        # The hooks look dist.all_reduce up at call time (default_hooks.py, powerSGD_hook.py).
        dist.all_reduce = counted


def register_hook(ddp, a):
    if a.comm_hook == "none":
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as dh
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    if a.comm_hook == "allreduce":
        ddp.register_comm_hook(None, dh.allreduce_hook)
    elif a.comm_hook == "fp16":
        ddp.register_comm_hook(None, dh.fp16_compress_hook)
    elif a.comm_hook == "bf16":
        ddp.register_comm_hook(None, dh.bf16_compress_hook)
    elif a.comm_hook == "noop":
        def noop_hook(_, bucket):
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        ddp.register_comm_hook(None, noop_hook)
    else:
        state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=a.powersgd_rank,
                                 start_powerSGD_iter=a.powersgd_start_iter)
        hook = ps.powerSGD_hook if a.comm_hook == "powersgd" else ps.batched_powerSGD_hook
        ddp.register_comm_hook(state, hook)


def run(rank, a, port):
    # A hang guard: dump every thread's stack and exit instead of waiting forever.
    faulthandler.dump_traceback_later(a.timeout, exit=True)
    os.environ["MASTER_ADDR"] = a.master_addr
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    global DEVICE
    if a.device == "cuda":
        DEVICE = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(DEVICE)
    backend = a.backend or ("nccl" if a.device == "cuda" else "gloo")
    dist.init_process_group(backend, rank=rank, world_size=a.world)
    torch.manual_seed(a.seed)
    sizes = [int(v) for v in a.mlp_sizes.split(",")] if a.mlp_sizes else None
    if a.model == "resnet20":
        model = torch_models.resnet(20, 16)
    elif sizes:
        model = torch_models.mlp_sizes(sizes)
    else:
        model = torch_models.mlp(a.mlp_layers, a.mlp_width)
    model.train()
    g = torch.Generator().manual_seed(a.seed + 1000 + rank)
    shape = (a.batch, 1, 28, 28) if a.model == "resnet20" else (a.batch, sizes[0] if sizes else a.mlp_width)
    x = torch.randn(*shape, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    model, x, y = model.to(DEVICE), x.to(DEVICE), y.to(DEVICE)
    net = model
    ddp = None
    if a.mode != "single":
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 1024 * 1024)
        ddp = DDP(model, bucket_cap_mb=a.bucket_cap_mb)
        register_hook(ddp, a)
        net = ddp
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    times = []
    counter = PayloadCounter()
    counter.install()
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    dist.barrier()
    start = time.perf_counter()
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            sync()
            if DEVICE.type == "cuda":
                torch.cuda.reset_peak_memory_stats(DEVICE)
            start = time.perf_counter()
            counter.bytes = 0
        t0 = time.perf_counter()
        if a.mode == "nosync":
            with ddp.no_sync():
                loss = criterion(net(x), y)
                opt.zero_grad()
                loss.backward()
        else:
            loss = criterion(net(x), y)
            opt.zero_grad()
            loss.backward()
        opt.step()
        sync()
        t1 = time.perf_counter()
        if s >= a.warmup:
            times.append(1e3 * (t1 - t0))
    mean_ms = 1e3 * (time.perf_counter() - start) / max(1, a.steps)
    # Without a hook the C++ reducer allreduces every bucket itself (not through dist.all_reduce).
    bytes_per_step = counter.bytes / max(1, a.steps)
    if a.mode == "ddp" and a.comm_hook == "none":
        bytes_per_step = grad_bytes
    step_ms = max_over_ranks(statistics.median(times))
    mean_ms = max_over_ranks(mean_ms)
    rss = max_over_ranks(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    peak_device_mb = max_over_ranks(torch.cuda.max_memory_allocated(DEVICE) / 1048576.0
                                    if DEVICE.type == "cuda" else 0.0)
    buckets = 0
    if ddp is not None:
        try:
            # Buckets after the rebuild (PyTorch 1.13 starts with one bucket when
            # find_unused_parameters is off and rebuilds after the first iteration).
            data = ddp._get_ddp_logging_data()
            sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes", "")
            buckets = len([s for s in str(sizes).split(",") if s.strip()])
        except Exception:  # private API; the count is informational only
            buckets = -1
    if rank == 0:
        print(f"RESULT impl=torch model={a.model} mode={a.mode} world={a.world} batch={a.batch} "
              f"steps={a.steps} bucket_cap_mb={a.bucket_cap_mb:g} first_bucket_mb={a.first_bucket_mb:g} "
              f"buckets={buckets} params={len(list(model.parameters()))} ms_per_step={step_ms:.2f} "
              f"mean_ms_per_step={mean_ms:.2f} img_per_s={1000.0 * a.world * a.batch / step_ms:.1f} "
              f"peak_rss_mb={rss:.1f} comm_hook={a.comm_hook} bytes_per_step={bytes_per_step:.0f} "
              f"device={a.device} backend={backend} peak_device_mb={peak_device_mb:.1f}", flush=True)
    dist.destroy_process_group()
    # Skip interpreter teardown: a gloo rank can hang forever in C++ destructors after run()
    # returned (seen with 2 ranks; faulthandler showed no Python frame).
    sys.stdout.flush()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--model", default="resnet20", choices=["resnet20", "mlp"])
    ap.add_argument("--mode", default="ddp", choices=["ddp", "nosync", "single"])
    ap.add_argument("--bucket_cap_mb", type=float, default=25)
    ap.add_argument("--first_bucket_mb", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--mlp_layers", type=int, default=200)
    ap.add_argument("--mlp_width", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mlp_sizes", default="", help="layer widths, e.g. 784,4096,4096,10")
    ap.add_argument("--comm_hook", default="none",
                    choices=["none", "allreduce", "fp16", "bf16", "noop", "powersgd", "batched_powersgd"])
    ap.add_argument("--powersgd_rank", type=int, default=1)
    ap.add_argument("--powersgd_start_iter", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--backend", default="", choices=["", "gloo", "nccl"], help="default: nccl on cuda, else gloo")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before a rank dumps its stacks and exits")
    ap.add_argument("--rank", type=int, default=-1, help="run only this rank, in this process")
    ap.add_argument("--master_addr", default="127.0.0.1")
    ap.add_argument("--master_port", type=int, default=0, help="default: 29500 + pid mod 1000")
    a = ap.parse_args()
    port = a.master_port or 29500 + os.getpid() % 1000
    if a.rank >= 0:
        run(a.rank, a, port)
    else:
        mp.spawn(run, args=(a, port), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
