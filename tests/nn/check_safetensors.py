#!/usr/bin/env python3
"""Checks a safetensors file's layout with nothing but the standard library (json + struct), as an
independent reader for files nn::save writes. Not a required test; run it by hand:

    TEST_TMPDIR=/tmp/ckpt bazel-bin/tests/nn/checkpoint_test --gtest_filter='*EveryDtype*'
    python3 tests/nn/check_safetensors.py /tmp/ckpt/ckpt_RoundTripsEveryDtypeInOrder/all.safetensors

Prints each tensor's name, dtype, shape and values; exits non-zero on any layout violation.
If torch is importable it also rebuilds every tensor with torch.frombuffer and prints it.
"""
import json
import struct
import sys

FORMATS = {"F32": ("f", 4), "F64": ("d", 8), "F16": ("e", 2), "BF16": (None, 2),
           "I32": ("i", 4), "I64": ("q", 8), "U8": ("B", 1), "BOOL": ("?", 1)}


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    assert len(blob) >= 8, "file shorter than the 8-byte length"
    (n,) = struct.unpack("<Q", blob[:8])
    assert 8 + n <= len(blob), f"header length {n} past end of file ({len(blob)} bytes)"
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    raw_header = blob[8:8 + n]
    assert raw_header.rstrip(b" ") == raw_header.rstrip(), "header padding must be spaces"
    header = json.loads(raw_header)
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values()), "metadata values must be strings"
    print("metadata:", meta)
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    end_prev = 0
    for name, info in entries:
        fmt, size = FORMATS[info["dtype"]]
        begin, end = info["data_offsets"]
        numel = 1
        for d in info["shape"]:
            numel *= d
        assert end - begin == numel * size, f"{name}: offsets do not match shape"
        assert begin >= end_prev or begin == end, f"{name}: overlaps the previous tensor"
        assert end <= len(data), f"{name}: data past end of file"
        end_prev = max(end_prev, end)
        chunk = data[begin:end]
        if fmt is None:  # bfloat16: the top half of a float32
            values = [struct.unpack("<f", b"\0\0" + chunk[i:i + 2])[0] for i in range(0, len(chunk), 2)]
        else:
            values = list(struct.unpack("<" + fmt * numel, chunk))
        print(f"{name}: {info['dtype']} {info['shape']} {values}")
    assert end_prev == len(data), "trailing bytes after the last tensor"
    try:
        import torch
    except ImportError:
        return
    dtypes = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
              "BF16": torch.bfloat16, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8,
              "BOOL": torch.bool}
    for name, info in entries:
        begin, end = info["data_offsets"]
        buf = bytearray(data[begin:end])
        t = (torch.frombuffer(buf, dtype=dtypes[info["dtype"]]) if buf
             else torch.empty(0, dtype=dtypes[info["dtype"]])).reshape(info["shape"])
        print(f"torch {name}: {t}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        check(p)
    print("OK")
