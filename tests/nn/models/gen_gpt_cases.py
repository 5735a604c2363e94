#!/usr/bin/python3
"""Expected values for tests/nn/models/gpt_test.cc from PyTorch (float64): nanoGPT's model
(karpathy/nanoGPT model.py, copied below with its module and parameter names), for two small
configs (bias and no bias), its loss and the gradient of every parameter on a fixed batch.

nanoGPT's flash path calls F.scaled_dot_product_attention (torch >= 2.0); Debian's torch 1.13 has
none, so attention is its slow path's math (softmax(q k^T / sqrt(hs)) masked causally, then v),
which is what SDPA computes, with the mask buffer not persistent so the state dict is the flash
path's (no attn.bias).

Writes two files:
    gpt_cases.safetensors     per case "<case>.param.<name>" (state dict, both tied names),
                              "<case>.idx", "<case>.targets", "<case>.logits", "<case>.loss",
                              "<case>.grad.<name>" (named_parameters: the tied weight once)
    gpt_nanogpt_state.safetensors   the "bias" case's model.state_dict() as nanoGPT saves it,
                              in its order

    /usr/bin/python3 tests/nn/models/gen_gpt_cases.py tests/nn/models
"""
import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_file import save  # noqa: E402


# ---- nanoGPT's model.py (the parts a forward and backward use) ----

class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("mask", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# ---- the cases ----

def make_case(out, name, config, seed, ignore_some):
    torch.manual_seed(seed)
    model = GPT(config).double()
    with torch.no_grad():
        # nanoGPT starts biases at 0 and LayerNorm weights at 1; move them off those values so a
        # bias or norm weight used in the wrong place shows in the comparison.
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    gen = torch.Generator().manual_seed(seed + 1)
    idx = torch.randint(0, config.vocab_size, (3, config.block_size), generator=gen)
    targets = torch.randint(0, config.vocab_size, (3, config.block_size), generator=gen)
    if ignore_some:
        targets[0, 2] = -1
        targets[2, 5] = -1
    logits, loss = model(idx, targets)
    loss.backward()
    for pn, t in model.state_dict().items():
        out[f"{name}.param.{pn}"] = t
    for pn, p in model.named_parameters():
        out[f"{name}.grad.{pn}"] = p.grad
    out[f"{name}.idx"] = idx
    out[f"{name}.targets"] = targets
    out[f"{name}.logits"] = logits.detach()
    out[f"{name}.loss"] = loss.detach()
    return model


def main(directory):
    small = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=16, dropout=0.0)
    out = {}
    model = make_case(out, "bias", GPTConfig(**small, bias=True), 53, False)
    make_case(out, "no_bias", GPTConfig(**small, bias=False), 54, True)
    meta = {"generator": "tests/nn/models/gen_gpt_cases.py", "torch": torch.__version__}
    save(out, os.path.join(directory, "gpt_cases.safetensors"), meta)
    save(model.state_dict(), os.path.join(directory, "gpt_nanogpt_state.safetensors"), meta)


if __name__ == "__main__":
    main(sys.argv[1])
