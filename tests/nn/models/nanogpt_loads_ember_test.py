#!/usr/bin/python3
"""A checkpoint ember saves loads into PyTorch's nanoGPT (gen_gpt_cases.py's copy of model.py)
with load_state_dict(strict=True), the tie intact, and gives ember's logits and loss (float64,
1e-12 relative), with and without biases. Skips (passes, saying so) where torch is not importable.

    nanogpt_loads_ember_test.py GPT_EXPORT_BINARY
"""
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIPPED: torch is not importable from", sys.executable)
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from gen_gpt_cases import GPT, GPTConfig  # noqa: E402
from safetensors_file import load  # noqa: E402


def relative_error(got, want):
    return ((got - want).abs() / (want.abs() + 1e-12)).max().item()


def check(exporter, bias, directory):
    subprocess.run([exporter, directory, "1" if bias else "0"], check=True)
    state = load(os.path.join(directory, "gpt.safetensors"))
    io = load(os.path.join(directory, "gpt_io.safetensors"))
    model = GPT(GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=16, dropout=0.0,
                          bias=bias)).double()
    assert list(state) == list(model.state_dict()), (list(state), list(model.state_dict()))
    model.load_state_dict(state, strict=True)
    assert model.lm_head.weight is model.transformer.wte.weight
    with torch.no_grad():
        logits, loss = model(io["idx"], io["targets"])
    errors = (relative_error(logits, io["logits"]), relative_error(loss, io["loss"]))
    print(f"bias={bias}: {len(state)} tensors loaded strictly; logits rel err {errors[0]:.3g}, "
          f"loss rel err {errors[1]:.3g}")
    return max(errors) < 1e-12


def main(exporter):
    ok = True
    for bias in (True, False):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
            ok = check(exporter, bias, d) and ok
    print(f"{2 if ok else 0} passed, {0 if ok else 2} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
