"""PyTorch twin of bench/resnet_train_bench.cc: ResNet-20 training steps (batch 64, 1x28x28, one
thread, SGD momentum 0.9 + weight decay 5e-4, cross-entropy) on a fixed synthetic batch.

Usage: /usr/bin/python3 bench/resnet_train_torch.py [--steps 30] [--warmup 5] [--batch 64]
           [--depth 20] [--width 16] [--profile]
Prints the same RESULT line as the C++ binary (medians over the timed steps; peak RSS from
getrusage). --profile adds torch.profiler's per-op table (self CPU time) for a few steps.
"""
import argparse
import os
import re
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = torch_models.resnet(a.depth, a.width)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        t0 = time.perf_counter()
        loss = criterion(net(x), y)
        t1 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        return t0, t1, t2, t3

    fwd, bwd, upd, total = [], [], [], []
    for s in range(a.warmup + a.steps):
        t0, t1, t2, t3 = step()
        if s >= a.warmup:
            fwd.append(1e3 * (t1 - t0))
            bwd.append(1e3 * (t2 - t1))
            upd.append(1e3 * (t3 - t2))
            total.append(1e3 * (t3 - t0))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    step_ms = statistics.median(total)
    # ATen's level (torch 1.13 has no torch.backends.cpu.get_cpu_capability yet).
    found = re.search(r"CPU capability usage: (\w+)", torch.__config__.show())
    capability = found.group(1) if found else "?"
    if capability == "NO":  # "NO AVX": ATen's default level
        capability = "default"
    print(f"RESULT impl=torch model=resnet{a.depth} batch={a.batch} steps={a.steps} "
          f"threads={torch.get_num_threads()} capability={capability.lower()} "
          f"ms_per_step={step_ms:.2f} fwd_ms={statistics.median(fwd):.2f} "
          f"bwd_ms={statistics.median(bwd):.2f} opt_ms={statistics.median(upd):.2f} "
          f"img_per_s={1000.0 * a.batch / step_ms:.1f} peak_rss_mb={rss_mb:.1f} "
          f"torch={torch.__version__}", flush=True)
    if a.profile:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))


if __name__ == "__main__":
    main()
