"""PyTorch twin of bench/gpu_bench.cc on the same GPU: torch.matmul GEMM TFLOP/s and ResNet-20
training steps (batch 256, 1x28x28, SGD momentum 0.9 + weight decay 5e-4, cross-entropy), eager
mode, TF32 off (as ember's default). Prints the same RESULT lines.

Usage: python3 bench/gpu_bench_torch.py [--smoke]
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


def resnet(batch, steps, warmup):
    torch.manual_seed(0)
    net = torch_models.resnet(20, 16).cuda().train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    torch.cuda.reset_peak_memory_stats()

    def step():
        loss = criterion(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    ms = []
    for s in range(warmup + steps):
        t = timed(step)
        if s >= warmup:
            ms.append(1e3 * t)
    print(f"RESULT resnet20 batch={batch} torch_ms_per_step={statistics.median(ms):.3f} "
          f"torch_peak_allocated_mb={torch.cuda.max_memory_allocated() / 1048576:.1f} "
          f"torch_peak_reserved_mb={torch.cuda.max_memory_reserved() / 1048576:.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_bench_torch: no CUDA device; nothing run")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for n in ([48] if a.smoke else [1024, 2048, 4096, 8192]):
        gemm(n, 1 if a.smoke else max(3, 20 * 1024 // n))
    resnet(4 if a.smoke else 256, 1 if a.smoke else 30, 0 if a.smoke else 5)


if __name__ == "__main__":
    main()
