// The DETAIL fingerprint (debug.h).
#include "distributed/diagnostics/debug.h"

#include <sstream>

namespace ember::distributed {
namespace {
const char* reduce_op_label(int op) {
  // Mirrors ReduceOp in process_group.h; kept here as names only so debug has no dependency on it.
  static const char* kNames[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX"};
  return op >= 0 && op < 5 ? kNames[op] : "?";
}
}  // namespace

CollectiveFingerprint CollectiveFingerprint::make(OpType op, uint64_t sequence_number,
                                                  const std::vector<Tensor>& tensors,
                                                  int reduce_op, int root, bool sizes_may_differ) {
  CollectiveFingerprint f;
  f.op = static_cast<int32_t>(op);
  f.sequence_number = sequence_number;
  f.reduce_op = reduce_op;
  f.root = root;
  f.num_tensors = static_cast<int32_t>(tensors.size());
  f.sizes_may_differ = sizes_may_differ ? 1 : 0;
  for (const auto& t : tensors) f.numel += t.numel();
  if (!tensors.empty()) {
    const Tensor& t = tensors.front();
    f.dtype = static_cast<int32_t>(t.dtype());
    f.ndim = static_cast<int32_t>(t.dim());
    for (int d = 0; d < std::min<int>(f.ndim, kMaxDims); ++d) f.sizes[d] = t.size(d);
  }
  return f;
}

std::string CollectiveFingerprint::str() const {
  std::ostringstream os;
  os << op_type_name(static_cast<OpType>(op)) << " #" << sequence_number << " (";
  if (reduce_op >= 0) os << reduce_op_label(reduce_op) << ", ";
  if (root >= 0) os << "root " << root << ", ";
  if (dtype >= 0) {
    os << dtype_name(static_cast<ScalarType>(dtype)) << " [";
    for (int d = 0; d < std::min(ndim, kMaxDims); ++d) os << (d ? ", " : "") << sizes[d];
    if (ndim > kMaxDims) os << ", ...";
    os << "], ";
  }
  os << num_tensors << (num_tensors == 1 ? " tensor" : " tensors") << ", " << numel << " elements)";
  return os.str();
}

bool CollectiveFingerprint::matches(const CollectiveFingerprint& o) const {
  if (op != o.op || sequence_number != o.sequence_number || dtype != o.dtype ||
      reduce_op != o.reduce_op || root != o.root || num_tensors != o.num_tensors) {
    return false;
  }
  if (sizes_may_differ || o.sizes_may_differ) return true;
  return numel == o.numel && ndim == o.ndim && sizes == o.sizes;
}

void check_fingerprints(const std::vector<CollectiveFingerprint>& all, int rank,
                        const std::string& group_name) {
  const CollectiveFingerprint& mine = all.at(rank);
  bool ok = true;
  for (const auto& f : all) ok = ok && f.matches(mine);
  if (ok) return;
  std::ostringstream os;
  os << "collective mismatch in process group " << group_name << " detected on rank " << rank
     << " (EMBER_DISTRIBUTED_DEBUG=DETAIL): ranks called different collectives:";
  for (size_t r = 0; r < all.size(); ++r) {
    os << "\n  rank " << r << " called " << all[r].str();
    if (!all[r].matches(mine)) os << "   <-- differs from rank " << rank;
  }
  throw Error(os.str());
}

}  // namespace ember::distributed
