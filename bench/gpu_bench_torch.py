"""PyTorch twin of bench/gpu_bench.cc on the same GPU: torch.matmul GEMM TFLOP/s and ResNet-20
training steps (batch 256, 1x28x28, SGD momentum 0.9 + weight decay 5e-4, cross-entropy), eager
mode, TF32 off (as ember's default). Prints the same RESULT lines.

Usage: python3 bench/gpu_bench_torch.py [--smoke] [--profile]
  --profile: the GPU kernels of 2 ResNet-20 steps from torch.profiler, by total device time (to
             set beside ember's, which scripts/gpu_check.sh's profile part reads with ncu)
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def timed(f):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    f()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def gemm(n, iters):
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    torch.matmul(a, b)
    s = timed(lambda: [torch.matmul(a, b) for _ in range(iters)])
    print(f"RESULT gemm n={n} torch_tflops={2.0 * n ** 3 * iters / s / 1e12:.2f}")


def resnet_step(batch):
    torch.manual_seed(0)
    net = torch_models.resnet(20, 16).cuda().train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        loss = criterion(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def resnet(batch, steps, warmup):
    step = resnet_step(batch)
    torch.cuda.reset_peak_memory_stats()
    ms = []
    for s in range(warmup + steps):
        t = timed(step)
        if s >= warmup:
            ms.append(1e3 * t)
    print(f"RESULT resnet20 batch={batch} torch_ms_per_step={statistics.median(ms):.3f} "
          f"torch_peak_allocated_mb={torch.cuda.max_memory_allocated() / 1048576:.1f} "
          f"torch_peak_reserved_mb={torch.cuda.max_memory_reserved() / 1048576:.1f}")


def device_us(e):
    # device_time_total since PyTorch 2.4; cuda_time_total before (1.13 has only that one).
    return e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total


def profile_resnet(batch):
    from torch.profiler import ProfilerActivity, profile
    step = resnet_step(batch)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if device_us(e) > 0]
    total = sum(device_us(e) for e in events)
    launches = sum(e.count for e in events)
    print(f"# torch: 2 steps, {launches} device activities, {total / 1e3:.3f} ms of device time")
    for e in sorted(events, key=lambda e: -device_us(e))[:25]:
        print(f"{device_us(e) / 1e3:9.3f} ms {e.count:6d}x  {e.key[:110]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_bench_torch: no CUDA device; nothing run")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    if a.profile:
        profile_resnet(256)
        return
    for n in ([48] if a.smoke else [1024, 2048, 4096, 8192]):
        gemm(n, 1 if a.smoke else max(3, 20 * 1024 // n))
    resnet(4 if a.smoke else 256, 1 if a.smoke else 30, 0 if a.smoke else 5)


if __name__ == "__main__":
    main()
