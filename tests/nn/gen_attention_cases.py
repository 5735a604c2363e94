#!/usr/bin/python3
"""Expected values for tests/nn/attention_test.cc from PyTorch (float64): GELU in both forms with
its gradient, and scaled dot-product attention, plain and causal, with the gradients of
sum(out * w) in query, key and value. Attention is PyTorch's documented reference math for
torch.nn.functional.scaled_dot_product_attention (torch 2.x; Debian's torch 1.13 predates it):
softmax(q k^T / sqrt(E) + mask) v, the mask -inf above the diagonal (tril of ones(L, S)).

    /usr/bin/python3 tests/nn/gen_attention_cases.py tests/nn/attention_cases.safetensors
"""
import math
import sys

import torch
import torch.nn.functional as F

from safetensors_file import save


def reference_attention(q, k, v, is_causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        allowed = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(diagonal=0)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_case(out, name, q_shape, k_shape, v_shape, is_causal, gen):
    q, k, v = (torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True)
               for s in (q_shape, k_shape, v_shape))
    y = reference_attention(q, k, v, is_causal)
    w = torch.randn(y.shape, generator=gen, dtype=torch.float64)
    (y * w).sum().backward()
    for key, t in (("q", q), ("k", k), ("v", v), ("out", y), ("w", w), ("grad_q", q.grad),
                   ("grad_k", k.grad), ("grad_v", v.grad)):
        out[f"{name}.{key}"] = t


def main(path):
    gen = torch.Generator().manual_seed(53)
    out = {}
    x = torch.linspace(-6, 6, 49, dtype=torch.float64)
    for approximate in ("none", "tanh"):
        xg = x.clone().requires_grad_(True)
        y = F.gelu(xg, approximate=approximate)
        w = torch.cos(torch.arange(49, dtype=torch.float64))
        (y * w).sum().backward()
        out[f"gelu_{approximate}.x"] = x
        out[f"gelu_{approximate}.w"] = w
        out[f"gelu_{approximate}.out"] = y
        out[f"gelu_{approximate}.grad"] = xg.grad
    attention_case(out, "plain", (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3), False, gen)
    attention_case(out, "causal", (2, 2, 7, 4), (2, 2, 7, 4), (2, 2, 7, 5), True, gen)
    attention_case(out, "causal_wide", (1, 2, 3, 4), (1, 2, 6, 4), (1, 2, 6, 2), True, gen)
    save(out, path, {"generator": "tests/nn/gen_attention_cases.py", "torch": torch.__version__})


if __name__ == "__main__":
    main(sys.argv[1])
