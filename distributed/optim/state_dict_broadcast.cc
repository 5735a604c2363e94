// ZeRO stage 1: a state dict from one rank to all (header of keys, dtypes and shapes, then data).
#include "distributed/optim/state_dict_broadcast.h"

#include <string>
#include <vector>

#include "distributed/collective_helpers.h"
#include "tensor/factories.h"

namespace ember::distributed {

namespace {
// [n, then per entry: key length, key bytes..., dtype, ndim, sizes...], all int64.
std::vector<int64_t> encode_header(const nn::StateDict& sd) {
  std::vector<int64_t> h{static_cast<int64_t>(sd.size())};
  for (const auto& [key, t] : sd) {
    EMBER_CHECK(t.defined() && !t.is_sparse(), "broadcast_state_dict: '", key,
                "' must be a defined dense tensor, got ", t.describe());
    h.push_back(static_cast<int64_t>(key.size()));
    for (char c : key) h.push_back(static_cast<unsigned char>(c));
    h.push_back(static_cast<int64_t>(t.dtype()));
    h.push_back(t.dim());
    for (int64_t s : t.sizes()) h.push_back(s);
  }
  return h;
}

// Empty tensors with the header's keys, dtypes and shapes.
nn::StateDict decode_header(const std::vector<int64_t>& h) {
  nn::StateDict sd;
  size_t at = 0;
  const int64_t n = h.at(at++);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t len = h.at(at++);
    std::string key;
    for (int64_t c = 0; c < len; ++c) key.push_back(static_cast<char>(h.at(at++)));
    const auto dtype = static_cast<ScalarType>(h.at(at++));
    Shape shape(h.at(at++));
    for (auto& s : shape) s = h.at(at++);
    sd.emplace_back(key, empty(shape, dtype));
  }
  return sd;
}
}  // namespace

nn::StateDict broadcast_state_dict(ProcessGroup& group, const nn::StateDict& sd, int root,
                                   int64_t bucket_bytes) {
  const bool is_root = group.rank() == root;
  std::vector<int64_t> header = is_root ? encode_header(sd) : std::vector<int64_t>{};
  std::vector<Tensor> length{from_vector<int64_t>({static_cast<int64_t>(header.size())}, {1})};
  group.broadcast(length, BroadcastOptions{root})->wait();
  const int64_t n = length[0].item<int64_t>();
  std::vector<Tensor> encoded{is_root ? from_vector<int64_t>(header, {n}) : empty({n}, kInt64)};
  group.broadcast(encoded, BroadcastOptions{root})->wait();
  if (!is_root) {
    const int64_t* p = encoded[0].data_ptr<int64_t>();
    header.assign(p, p + n);
  }
  nn::StateDict out = decode_header(header);
  std::vector<Tensor> data;
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_root) out[i].second = sd[i].second.contiguous().clone();
    if (out[i].second.numel() > 0) data.push_back(out[i].second);
  }
  if (!data.empty()) broadcast_coalesced(group, data, bucket_bytes, root);
  return out;
}

}  // namespace ember::distributed
