"""Writes a dict of torch tensors as a safetensors file with the standard library only (json +
struct), for the test-case generators here: Debian's python3-torch comes without the safetensors
package. The layout is nn/checkpoint.h's."""
import json
import struct

import torch

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
          torch.bool: "BOOL", torch.uint8: "U8"}


def save(tensors, path, metadata=None):
    header = {"__metadata__": dict(metadata or {})}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


TORCH_DTYPES = {v: k for k, v in DTYPES.items()}


def load(path):
    """The file's tensors in saved (data offset) order, as a dict; its __metadata__ is dropped."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        dtype = TORCH_DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin else \
            torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(info["shape"]).clone()
    return out
