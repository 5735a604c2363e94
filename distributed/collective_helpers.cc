#include "distributed/collective_helpers.h"

#include <deque>
#include <map>
#include <sstream>

#include "distributed/utils.h"
#include "tensor/factories.h"

namespace ember::distributed {

std::vector<std::vector<size_t>> bucket_tensors_by_size(const std::vector<Tensor>& tensors,
                                                        int64_t buffer_size) {
  EMBER_CHECK(buffer_size > 0, "broadcast_coalesced: buffer_size must be positive, got ",
              buffer_size);
  // One open bucket per (dtype, device); a bucket closes when the next tensor would overflow it.
  // Closed buckets keep the order in which they filled, the same on every rank.
  struct Open {
    std::vector<size_t> indices;
    int64_t bytes = 0;
  };
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::vector<size_t>> buckets;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.defined(), "broadcast_coalesced: tensor ", i, " is undefined");
    const auto key = std::make_tuple(static_cast<int>(t.dtype()), static_cast<int>(t.device().type),
                                     t.device().index);
    Open& b = open[key];
    const int64_t bytes = static_cast<int64_t>(t.nbytes());
    if (!b.indices.empty() && b.bytes + bytes > buffer_size) {
      buckets.push_back(std::move(b.indices));
      b = Open{};
    }
    b.indices.push_back(i);
    b.bytes += bytes;
  }
  // Remaining open buckets, ordered by their first tensor so the order is the same on all ranks.
  std::vector<std::vector<size_t>> rest;
  for (auto& kv : open) {
    if (!kv.second.indices.empty()) rest.push_back(std::move(kv.second.indices));
  }
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  for (auto& b : rest) buckets.push_back(std::move(b));
  return buckets;
}

void broadcast_coalesced(ProcessGroup& process_group, const std::vector<Tensor>& tensors,
                         int64_t buffer_size, int root) {
  EMBER_CHECK(root >= 0 && root < process_group.size(), "broadcast_coalesced: root ", root,
              " out of range for a group of size ", process_group.size());
  const bool is_root = process_group.rank() == root;
  struct InFlight {
    WorkPtr work;
    Tensor flat;
    std::vector<Tensor> members;
  };
  std::deque<InFlight> in_flight;
  auto retire_oldest = [&] {
    InFlight& f = in_flight.front();
    f.work->wait();
    // The root's tensors already hold the values it sent.
    if (!is_root) copy_from_flat(f.flat, f.members);
    in_flight.pop_front();
  };
  for (const auto& indices : bucket_tensors_by_size(tensors, buffer_size)) {
    InFlight f;
    for (size_t i : indices) f.members.push_back(tensors[i]);
    const int64_t total = check_same_dtype_device(f.members, "broadcast_coalesced");
    if (total == 0) continue;
    // Only the root's values matter: the other ranks need just a buffer to receive into.
    f.flat = is_root ? flatten_dense_tensors(f.members)
                     : empty({total}, TensorOptions(f.members[0].dtype(), f.members[0].device()));
    std::vector<Tensor> list{f.flat};
    BroadcastOptions opts;
    opts.root_rank = root;
    f.work = process_group.broadcast(list, opts);
    in_flight.push_back(std::move(f));
    // At most two buckets in flight bounds the extra memory to two buffers of buffer_size.
    if (in_flight.size() >= 2) retire_oldest();
  }
  while (!in_flight.empty()) retire_oldest();
}

namespace {

// Per parameter: dtype, ndim, sizes..., strides...
std::vector<int64_t> param_metadata(const std::vector<Tensor>& params) {
  std::vector<int64_t> meta;
  for (const auto& p : params) {
    meta.push_back(static_cast<int64_t>(p.dtype()));
    meta.push_back(p.dim());
    for (int64_t s : p.sizes()) meta.push_back(s);
    for (int64_t s : p.strides()) meta.push_back(s);
  }
  return meta;
}

Tensor broadcast_int64(ProcessGroup& pg, std::vector<int64_t> values) {
  Tensor t = from_vector<int64_t>(values).to(pg.collective_device());
  std::vector<Tensor> list{t};
  pg.broadcast(list, BroadcastOptions{})->wait();
  return t.to(kCPU);
}

std::string param_label(size_t index, const std::vector<std::string>& names) {
  std::ostringstream os;
  os << "parameter " << index;
  if (index < names.size() && !names[index].empty()) os << " ('" << names[index] << "')";
  return os.str();
}

// Compares this rank's parameters with rank 0's metadata; returns an error message or "".
std::string compare_with_rank0(const std::vector<Tensor>& params, const Tensor& meta0, int rank,
                               const std::vector<std::string>& names) {
  const int64_t* m = meta0.data_ptr<int64_t>();
  const int64_t n = meta0.numel();
  int64_t pos = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (pos + 2 > n) return "rank 0's parameter metadata is truncated";
    const auto dtype0 = static_cast<ScalarType>(m[pos]);
    const int64_t ndim0 = m[pos + 1];
    pos += 2;
    if (pos + 2 * ndim0 > n) return "rank 0's parameter metadata is truncated";
    const Shape sizes0(m + pos, m + pos + ndim0);
    const Shape strides0(m + pos + ndim0, m + pos + 2 * ndim0);
    pos += 2 * ndim0;
    const Tensor& p = params[i];
    if (p.sizes() != sizes0 || p.dtype() != dtype0) {
      return detail::str_cat(param_label(i, names), " on rank ", rank, " has shape ",
                             dtype_name(p.dtype()), shape_to_string(p.sizes()),
                             ", but on rank 0 it has shape ", dtype_name(dtype0),
                             shape_to_string(sizes0));
    }
    if (p.strides() != strides0) {
      return detail::str_cat(param_label(i, names), " on rank ", rank, " has shape ",
                             shape_to_string(p.sizes()), " with strides ",
                             shape_to_string(p.strides()), ", but on rank 0 its strides are ",
                             shape_to_string(strides0),
                             " (same shape, different memory layout)");
    }
  }
  return "";
}

}  // namespace

void verify_params_across_processes(ProcessGroup& process_group, const std::vector<Tensor>& params,
                                    const std::vector<std::string>& names) {
  const int rank = process_group.rank();
  const std::vector<int64_t> meta = param_metadata(params);
  // Two broadcasts so every rank receives rank 0's metadata whatever its own length: the header
  // (count, length) first, then the metadata itself.
  Tensor header = broadcast_int64(
      process_group, {static_cast<int64_t>(params.size()), static_cast<int64_t>(meta.size())});
  const int64_t count0 = header.data_ptr<int64_t>()[0];
  const int64_t length0 = header.data_ptr<int64_t>()[1];
  std::vector<int64_t> buffer = meta;
  buffer.resize(length0);
  Tensor meta0 = length0 > 0 ? broadcast_int64(process_group, buffer) : Tensor();

  std::string error;
  if (count0 != static_cast<int64_t>(params.size())) {
    error = detail::str_cat("rank ", rank, " has ", params.size(), " parameters, rank 0 has ",
                            count0);
  } else if (length0 > 0) {
    error = compare_with_rank0(params, meta0, rank, names);
  }
  // Every rank learns which ranks failed, so none of them goes on into a collective the failing
  // ones will never join.
  Tensor failed = zeros({process_group.size()}, TensorOptions(kInt32));
  failed.data_ptr<int32_t>()[rank] = error.empty() ? 0 : 1;
  std::vector<Tensor> list{failed.to(process_group.collective_device())};
  process_group.allreduce(list)->wait();
  failed = list[0].to(kCPU);
  std::vector<int> bad;
  for (int r = 0; r < process_group.size(); ++r) {
    if (failed.data_ptr<int32_t>()[r]) bad.push_back(r);
  }
  if (bad.empty()) return;
  if (!error.empty()) {
    EMBER_THROW("verify_params_across_processes: ", error,
                ". Every rank must build the same model (same parameters, in the same order)");
  }
  std::ostringstream os;
  for (size_t i = 0; i < bad.size(); ++i) os << (i ? ", " : "") << bad[i];
  EMBER_THROW("verify_params_across_processes: the parameters on rank(s) ", os.str(),
              " do not match rank 0's (see the error on those ranks); this is rank ", rank);
}

}  // namespace ember::distributed
