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
