// Checkpoint files: save and load a StateDict in the safetensors format, so a file written here
// opens in Python (safetensors.torch.load_file, or json + struct by hand) and vice versa.
//
// Layout: 8-byte little-endian header length N; N bytes of JSON
//   {"__metadata__": {"k": "v", ...},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8; then the tensors' raw little-endian bytes, offsets
// relative to the end of the header. dtypes: F32 F64 F16 BF16 I32 I64 U8 BOOL.
//
// The header is read and written with nlohmann-json (Debian's nlohmann-json3-dev). save adds a CRC-32
// of the header and data to __metadata__ (Note [Checkpoint checksum]); load verifies it when present.
//
// Nothing is lost on a crash: save writes a temporary file in the target's directory, fsyncs it,
// and renames it over the target. load validates everything (header length, JSON, dtypes, shapes
// against offsets, offsets in range and not overlapping) and throws ember::Error naming the file
// and the problem; it returns the tensors in file (data offset) order, which is the saved order.
#pragma once

#include <map>
#include <string>

#include "nn/state_dict.h"

namespace ember::nn {

using CheckpointMetadata = std::map<std::string, std::string>;

// Writes `sd` to `path` atomically. Tensors may live on any device and have any strides (they
// are saved contiguous); names must be unique, non-empty and not "__metadata__".
void save(const StateDict& sd, const std::string& path, const CheckpointMetadata& metadata = {});

// Reads a safetensors file into CPU tensors, in saved order.
StateDict load(const std::string& path);
// As above, also returning the file's "__metadata__" (empty if it has none).
StateDict load(const std::string& path, CheckpointMetadata* metadata);

}  // namespace ember::nn
