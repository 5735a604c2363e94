// ProcessGroup's public collectives: each checks its arguments, the same way for every backend,
// then hands them to the backend's run_ function (Note [One lifecycle for every collective]).
#include <numeric>

#include "distributed/process_group.h"

namespace ember::distributed {

// Note [One lifecycle for every collective]
// A collective goes through the same steps on every backend, as PyTorch's c10d does:
//   1. check the arguments (ProcessGroup's public function, below): one tensor per list, defined,
//      dtypes that agree, roots and peers in range, sizes that fit; then what the backend asks of
//      a tensor (check_backend_tensor: the MPI backend's int counts, NCCL's device and layout);
//   2. number it, stall there if fault injection asks, register it with the stall inspector, and
//      refuse it on a broken group: CollectiveLifecycle (distributed/collective_lifecycle.h), which
//      each backend calls where its collectives start, and which records why a group broke;
//   3. move the data: the backend's run_ function (an MPI request, NCCL calls on a stream), with
//      the trace span of the transfer.
// The numbering happens where a collective starts, not where it is called: a comm hook issues its
// later rounds from callbacks, which the MPI backend runs at once (Note [Collectives issued from
// callbacks run inline]), so the calls reach a group in a different order on each rank while the
// starts do not. At DETAIL a ProcessGroupWrapper sits in front of the backend and compares every
// rank's fingerprint of each collective before step 3 (Note [DETAIL fingerprints]).
// Adding a collective is one public function here with its argument check, one run_ function per
// backend (one that lacks it throws naming it: throw_unsupported), and its run_ in
// ProcessGroupWrapper, which says what its fingerprint records.

namespace {
std::string rank_of(const ProcessGroup& pg) {
  return detail::str_cat(" (rank ", pg.rank(), " of ", pg.size(), " in group ", pg.group_name(), ")");
}
}  // namespace

void ProcessGroup::check_tensor(const Tensor& t, const char* op) const {
  EMBER_CHECK(t.defined(), op_label(op), ": undefined tensor", rank_of(*this));
  check_backend_tensor(t, op);
}

void ProcessGroup::check_one(const std::vector<Tensor>& tensors, const char* op) const {
  EMBER_CHECK(tensors.size() == 1, op_label(op),
              ": expects exactly one tensor (one per device; a process drives one device), got ",
              tensors.size(), rank_of(*this));
  check_tensor(tensors[0], op);
}

void ProcessGroup::check_peer(int64_t peer, const char* what, const char* op) const {
  EMBER_CHECK(peer >= 0 && peer < size_, op_label(op), ": ", what, " ", peer,
              " out of range for a group of size ", size_, rank_of(*this));
}

void ProcessGroup::check_like(const Tensor& t, const Tensor& like, const char* op) const {
  check_tensor(t, op);
  EMBER_CHECK(t.dtype() == like.dtype(), op_label(op), ": dtype mismatch between ", t.describe(), " and ",
              like.describe(), rank_of(*this));
}

void ProcessGroup::check_per_rank_list(const std::vector<std::vector<Tensor>>& lists, const Tensor& like,
                                       bool same_numel, const char* what, const char* op) const {
  EMBER_CHECK(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size_), op_label(op),
              ": expects one ", what, " list of ", size_, " tensors (one per rank)", rank_of(*this));
  for (const Tensor& t : lists[0]) {
    check_like(t, like, op);
    EMBER_CHECK(!same_numel || t.numel() == like.numel(), op_label(op), ": every ", what, " must have ",
                like.numel(), " elements, as ", like.describe(), " has, got ", t.describe(), rank_of(*this));
  }
}

void ProcessGroup::check_splits(const Tensor& t, const std::vector<int64_t>& splits, const char* which,
                                const char* op) const {
  EMBER_CHECK(t.dim() >= 1, op_label(op), ": ", which, " ", t.describe(), " needs at least one dimension",
              rank_of(*this));
  if (splits.empty()) {
    EMBER_CHECK(t.size(0) % size_ == 0, op_label(op), ": ", which, " ", t.describe(),
                " dim 0 is not divisible by the world size ", size_, rank_of(*this));
    return;
  }
  EMBER_CHECK(splits.size() == static_cast<size_t>(size_), op_label(op), ": ", which, " split sizes need ",
              size_, " entries, got ", splits.size(), rank_of(*this));
  const int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  EMBER_CHECK(rows == t.size(0), op_label(op), ": ", which, " split sizes sum to ", rows, " but ",
              t.describe(), " has ", t.size(0), " rows", rank_of(*this));
}

// ---- the collectives: check, then run -----------------------------------------------------------

WorkPtr ProcessGroup::broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) {
  check_one(tensors, "broadcast");
  check_peer(opts.root_rank, "root rank", "broadcast");
  return run_broadcast(tensors, opts);
}

WorkPtr ProcessGroup::allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) {
  check_one(tensors, "allreduce");
  return run_allreduce(tensors, opts);
}

WorkPtr ProcessGroup::allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts) {
  EMBER_CHECK(!tensors.empty(), op_label("allreduce_coalesced"), ": empty tensor list", rank_of(*this));
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(tensors[i], "allreduce_coalesced");
    EMBER_CHECK(tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(),
                op_label("allreduce_coalesced"), ": all tensors must have the same dtype and device, but tensor 0 is ",
                tensors[0].describe(), " and tensor ", i, " is ", tensors[i].describe(), rank_of(*this));
  }
  return run_allreduce_coalesced(tensors, opts);
}

WorkPtr ProcessGroup::reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) {
  check_one(tensors, "reduce");
  check_peer(opts.root_rank, "root rank", "reduce");
  return run_reduce(tensors, opts);
}

WorkPtr ProcessGroup::allgather(std::vector<std::vector<Tensor>>& output_tensors,
                                std::vector<Tensor>& input_tensors, const AllgatherOptions& opts) {
  check_one(input_tensors, "allgather");
  check_per_rank_list(output_tensors, input_tensors[0], /*same_numel=*/false, "output", "allgather");
  const Tensor& mine = output_tensors[0][rank_];
  EMBER_CHECK(mine.numel() == input_tensors[0].numel(), op_label("allgather"), ": the output for rank ", rank_,
              " has ", mine.numel(), " elements but this rank's input has ", input_tensors[0].numel(),
              rank_of(*this));
  return run_allgather(output_tensors, input_tensors, opts);
}

WorkPtr ProcessGroup::allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) {
  check_tensor(input, "allgather_base");
  check_like(output, input, "allgather_base");
  EMBER_CHECK(output.numel() == input.numel() * size_, op_label("allgather_base"), ": output ",
              output.describe(), " must have world size (", size_, ") x input ", input.describe(), " elements",
              rank_of(*this));
  return run_allgather_base(output, input, opts);
}

WorkPtr ProcessGroup::allgather_coalesced(std::vector<std::vector<Tensor>>& output_lists,
                                          std::vector<Tensor>& input_list, const AllgatherOptions& opts) {
  for (const Tensor& t : input_list) check_tensor(t, "allgather_coalesced");
  return run_allgather_coalesced(output_lists, input_list, opts);
}

WorkPtr ProcessGroup::gather(std::vector<std::vector<Tensor>>& output_tensors,
                             std::vector<Tensor>& input_tensors, const GatherOptions& opts) {
  check_one(input_tensors, "gather");
  check_peer(opts.root_rank, "root rank", "gather");
  if (rank_ == opts.root_rank) {
    check_per_rank_list(output_tensors, input_tensors[0], /*same_numel=*/true, "output", "gather");
  } else {
    EMBER_CHECK(output_tensors.empty(), op_label("gather"), ": only the root (rank ", opts.root_rank,
                ") passes output tensors", rank_of(*this));
  }
  return run_gather(output_tensors, input_tensors, opts);
}

WorkPtr ProcessGroup::scatter(std::vector<Tensor>& output_tensors, std::vector<std::vector<Tensor>>& input_tensors,
                              const ScatterOptions& opts) {
  check_one(output_tensors, "scatter");
  check_peer(opts.root_rank, "root rank", "scatter");
  if (rank_ == opts.root_rank) {
    check_per_rank_list(input_tensors, output_tensors[0], /*same_numel=*/true, "input", "scatter");
  } else {
    EMBER_CHECK(input_tensors.empty(), op_label("scatter"), ": only the root (rank ", opts.root_rank,
                ") passes input tensors", rank_of(*this));
  }
  return run_scatter(output_tensors, input_tensors, opts);
}

WorkPtr ProcessGroup::reduce_scatter(std::vector<Tensor>& output_tensors,
                                     std::vector<std::vector<Tensor>>& input_tensors,
                                     const ReduceScatterOptions& opts) {
  check_one(output_tensors, "reduce_scatter");
  check_per_rank_list(input_tensors, output_tensors[0], /*same_numel=*/true, "input", "reduce_scatter");
  return run_reduce_scatter(output_tensors, input_tensors, opts);
}

WorkPtr ProcessGroup::reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) {
  check_tensor(output, "reduce_scatter_base");
  check_like(input, output, "reduce_scatter_base");
  EMBER_CHECK(input.numel() == output.numel() * size_, op_label("reduce_scatter_base"), ": input ",
              input.describe(), " must have world size (", size_, ") x output ", output.describe(), " elements",
              rank_of(*this));
  return run_reduce_scatter_base(output, input, opts);
}

WorkPtr ProcessGroup::alltoall_base(Tensor& output, Tensor& input, const std::vector<int64_t>& output_split_sizes,
                                    const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  check_tensor(input, "alltoall_base");
  check_like(output, input, "alltoall_base");
  check_splits(input, input_split_sizes, "input", "alltoall_base");
  check_splits(output, output_split_sizes, "output", "alltoall_base");
  return run_alltoall_base(output, input, output_split_sizes, input_split_sizes, opts);
}

WorkPtr ProcessGroup::alltoall(std::vector<Tensor>& output_tensors, std::vector<Tensor>& input_tensors,
                               const AllToAllOptions& opts) {
  EMBER_CHECK(output_tensors.size() == static_cast<size_t>(size_) &&
                  input_tensors.size() == static_cast<size_t>(size_),
              op_label("alltoall"), ": expects ", size_, " input and ", size_, " output tensors, got ",
              input_tensors.size(), " and ", output_tensors.size(), rank_of(*this));
  for (int r = 0; r < size_; ++r) {
    check_like(input_tensors[r], input_tensors[0], "alltoall");
    check_like(output_tensors[r], input_tensors[0], "alltoall");
  }
  return run_alltoall(output_tensors, input_tensors, opts);
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& opts) { return run_barrier(opts); }

WorkPtr ProcessGroup::send(std::vector<Tensor>& tensors, int dst_rank, int tag) {
  check_one(tensors, "send");
  check_peer(dst_rank, "destination rank", "send");
  return run_send(tensors, dst_rank, tag);
}

WorkPtr ProcessGroup::recv(std::vector<Tensor>& tensors, int src_rank, int tag) {
  check_one(tensors, "recv");
  check_peer(src_rank, "source rank", "recv");
  return run_recv(tensors, src_rank, tag);
}

// ---- what a backend lacks -------------------------------------------------------------------------

WorkPtr ProcessGroup::run_broadcast(std::vector<Tensor>&, const BroadcastOptions&) { throw_unsupported("broadcast"); }
WorkPtr ProcessGroup::run_allreduce(std::vector<Tensor>&, const AllreduceOptions&) { throw_unsupported("allreduce"); }
WorkPtr ProcessGroup::run_allreduce_coalesced(std::vector<Tensor>&, const AllreduceCoalescedOptions&) {
  throw_unsupported("allreduce_coalesced");
}
WorkPtr ProcessGroup::run_reduce(std::vector<Tensor>&, const ReduceOptions&) { throw_unsupported("reduce"); }
WorkPtr ProcessGroup::run_allgather(std::vector<std::vector<Tensor>>&, std::vector<Tensor>&, const AllgatherOptions&) {
  throw_unsupported("allgather");
}
WorkPtr ProcessGroup::run_allgather_base(Tensor&, Tensor&, const AllgatherOptions&) {
  throw_unsupported("allgather_base");
}
WorkPtr ProcessGroup::run_allgather_coalesced(std::vector<std::vector<Tensor>>&, std::vector<Tensor>&,
                                              const AllgatherOptions&) {
  throw_unsupported("allgather_coalesced");
}
WorkPtr ProcessGroup::run_gather(std::vector<std::vector<Tensor>>&, std::vector<Tensor>&, const GatherOptions&) {
  throw_unsupported("gather");
}
WorkPtr ProcessGroup::run_scatter(std::vector<Tensor>&, std::vector<std::vector<Tensor>>&, const ScatterOptions&) {
  throw_unsupported("scatter");
}
WorkPtr ProcessGroup::run_reduce_scatter(std::vector<Tensor>&, std::vector<std::vector<Tensor>>&,
                                         const ReduceScatterOptions&) {
  throw_unsupported("reduce_scatter");
}
WorkPtr ProcessGroup::run_reduce_scatter_base(Tensor&, Tensor&, const ReduceScatterOptions&) {
  throw_unsupported("reduce_scatter_base");
}
WorkPtr ProcessGroup::run_alltoall_base(Tensor&, Tensor&, const std::vector<int64_t>&, const std::vector<int64_t>&,
                                        const AllToAllOptions&) {
  throw_unsupported("alltoall_base");
}
WorkPtr ProcessGroup::run_alltoall(std::vector<Tensor>&, std::vector<Tensor>&, const AllToAllOptions&) {
  throw_unsupported("alltoall");
}
WorkPtr ProcessGroup::run_barrier(const BarrierOptions&) { throw_unsupported("barrier"); }
WorkPtr ProcessGroup::run_send(std::vector<Tensor>&, int, int) { throw_unsupported("send"); }
WorkPtr ProcessGroup::run_recv(std::vector<Tensor>&, int, int) { throw_unsupported("recv"); }

}  // namespace ember::distributed
