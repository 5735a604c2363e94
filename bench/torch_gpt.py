"""PyTorch twin of examples/train_gpt (alone and under mpirun): nanoGPT's model (model.py, the copy in
tests/nn/models/gen_gpt_cases.py that gpt_test checks ember's GPT against), nanoGPT's train.py loop (AdamW with two weight-decay groups, warm-up + cosine lr, gradient
clipping, estimate_loss), on the same character corpus and split as ember's data::TextCorpus.

Usage: /usr/bin/python3 bench/torch_gpt.py [--world 1|2] [--corpus FILE] [--max_iters 2000]
           [--batch 12] [--block_size 64] [--n_layer 4] [--n_head 4] [--n_embd 128] [--lr 1e-3]
           [--warmup_iters 100] [--min_lr_factor 0.1] [--weight_decay 0.1] [--beta2 0.99]
           [--grad_clip 1.0] [--eval_iters 20] [--bench_steps 0] [--seed 1337]
--world 2 spawns two processes (torch.multiprocessing, gloo, one thread each) under DDP, each
drawing --batch windows a step, as train_gpt does. --bench_steps N times N steps after 3 warm-up
steps and stops (tokens_per_s); otherwise it trains --max_iters steps and evaluates both splits
once at the end (eval_iters batches per rank). The last line
has train_gpt's RESULT fields:
  RESULT val_loss=... train_loss=... tokens_per_s=... ms_per_step=... steps=... tokens_per_step=...
"""
import argparse
import math
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

# nanoGPT's model.py as tests/nn/models/gpt_test.cc checks ember's GPT against it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "nn", "models"))
from gen_gpt_cases import GPT, GPTConfig  # noqa: E402


def load_text(path):
    if path:
        with open(path, "rb") as f:
            return f.read()
    # What data::TextCorpus::king_james_bible reads: bible-kjv's whole text.
    return subprocess.run(["bible", "Gen1:1-Rev22:21"], check=True, capture_output=True).stdout


def get_lr(a, it):
    min_lr = a.lr * a.min_lr_factor
    if it < a.warmup_iters:
        return a.lr * (it + 1) / (a.warmup_iters + 1)
    if it > a.max_iters:
        return min_lr
    ratio = (it - a.warmup_iters) / (a.max_iters - a.warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr - min_lr)


def run(rank, a):
    torch.set_num_threads(1)
    if a.world > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(a.port)
        dist.init_process_group("gloo", rank=rank, world_size=a.world)
    text = load_text(a.corpus)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    splits = {"train": data[:n], "val": data[n:]}
    torch.manual_seed(a.seed)
    model = GPT(GPTConfig(block_size=a.block_size, vocab_size=len(chars), n_layer=a.n_layer,
                          n_head=a.n_head, n_embd=a.n_embd, dropout=0.0, bias=True))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, a.beta2))
    net = DDP(model) if a.world > 1 else model
    gen = torch.Generator().manual_seed(a.seed + rank)

    def get_batch(split, g):
        d = splits[split]
        ix = torch.randint(len(d) - a.block_size - 1, (a.batch,), generator=g)
        x = torch.stack([d[i:i + a.block_size] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + a.block_size] for i in ix])
        return x, y

    @torch.no_grad()
    def estimate_loss(split):
        model.eval()
        g = torch.Generator().manual_seed(a.seed * 7 + rank)
        losses = [model(x, y)[1].item() for x, y in (get_batch(split, g) for _ in range(a.eval_iters))]
        model.train()
        t = torch.tensor([sum(losses) / len(losses)], dtype=torch.float64)
        if a.world > 1:
            dist.all_reduce(t)
        return t.item() / a.world

    steps = a.bench_steps + 3 if a.bench_steps else a.max_iters
    timed, seconds = 0, 0.0
    for it in range(steps):
        for group in opt.param_groups:
            group["lr"] = get_lr(a, it)
        t0 = time.perf_counter()
        x, y = get_batch("train", gen)
        _, loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        loss.item()
        if not a.bench_steps or it >= 3:
            seconds += time.perf_counter() - t0
            timed += 1
        if rank == 0 and not a.bench_steps and (it + 1) % max(1, steps // 10) == 0:
            print(f"step {it + 1}/{steps} loss {loss.item():.4f}", file=sys.stderr, flush=True)
    val = train = float("nan")
    if not a.bench_steps:
        train, val = estimate_loss("train"), estimate_loss("val")
    tokens_per_step = a.batch * a.block_size * a.world
    if rank == 0:
        print(f"RESULT val_loss={val:.4f} train_loss={train:.4f} "
              f"tokens_per_s={timed * tokens_per_step / seconds:.1f} ms_per_step={1000 * seconds / timed:.2f} "
              f"steps={timed} tokens_per_step={tokens_per_step}", flush=True)
    if a.world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    for name, default in [("world", 1), ("max_iters", 2000), ("batch", 12), ("block_size", 64),
                          ("n_layer", 4), ("n_head", 4), ("n_embd", 128), ("warmup_iters", 100),
                          ("eval_iters", 20), ("bench_steps", 0),
                          ("seed", 1337), ("port", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    for name, default in [("lr", 1e-3), ("min_lr_factor", 0.1), ("weight_decay", 0.1),
                          ("beta2", 0.99), ("grad_clip", 1.0)]:
        p.add_argument("--" + name, type=float, default=default)
    p.add_argument("--corpus", default="")
    a = p.parse_args()
    a.port = a.port or 29500 + os.getpid() % 1000  # runs side by side do not share a port
    if a.world > 1:
        mp.spawn(run, args=(a,), nprocs=a.world, join=True)
    else:
        run(0, a)


if __name__ == "__main__":
    main()
