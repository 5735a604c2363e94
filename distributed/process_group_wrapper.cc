// The DETAIL consistency check in front of a backend's group (Note [DETAIL fingerprints]).
#include "distributed/process_group_wrapper.h"

#include <cstdio>
#include <cstring>

#include "tensor/factories.h"

namespace ember::distributed {

namespace {
// What every rank must agree on; the sequence number is filled in once the exchange has one.
CollectiveFingerprint fingerprint(OpType op, const std::vector<Tensor>& tensors, int reduce_op = -1, int root = -1,
                                  bool sizes_may_differ = false) {
  return CollectiveFingerprint::make(op, 0, tensors, reduce_op, root, sizes_may_differ);
}
}  // namespace

ProcessGroupWrapper::ProcessGroupWrapper(ProcessGroupPtr wrapped)
    : ProcessGroup(wrapped->rank(), wrapped->size(), wrapped->options()), wrapped_(std::move(wrapped)) {
  set_lifecycle(wrapped_->lifecycle_);  // broken_reason(), stall_report(), side_channel(): the backend's
}

ProcessGroupPtr with_debug_wrapper(ProcessGroupPtr group) {
  if (group == nullptr || group->debug_level() != DebugLevel::kDetail) return group;
  if (dynamic_cast<ProcessGroupWrapper*>(group.get()) != nullptr) return group;
  return std::make_shared<ProcessGroupWrapper>(std::move(group));
}

void ProcessGroupWrapper::check_backend_tensor(const Tensor& t, const char* op) const {
  wrapped_->check_backend_tensor(t, op);
}

namespace {
// Every rank's fingerprint in `gathered` (the exchange's output, on any device) against this rank's;
// the error naming what each rank called when they differ, else nullptr.
std::exception_ptr compare(const Tensor& gathered, uint64_t checked_sequence_number, int rank, int size,
                           const std::string& group_name) {
  const Tensor host = gathered.to(kCPU);
  std::vector<CollectiveFingerprint> all(static_cast<size_t>(size));
  std::memcpy(all.data(), host.data_ptr(), sizeof(CollectiveFingerprint) * all.size());
  for (CollectiveFingerprint& f : all) f.sequence_number = checked_sequence_number;
  try {
    check_fingerprints(all, rank, group_name);
    return nullptr;
  } catch (const Error& e) {
    std::string message = detail::str_cat(all[static_cast<size_t>(rank)].str(), " on rank ", rank, " of ", size,
                                          " in group ", group_name, ": ", e.what());
    std::fprintf(stderr, "[ember.distributed] %s\n", message.c_str());
    return std::make_exception_ptr(Error(std::move(message)));
  }
}
}  // namespace

WorkPtr ProcessGroupWrapper::checked(const CollectiveFingerprint& mine, std::function<WorkPtr()> run) {
  constexpr int64_t kBytes = sizeof(CollectiveFingerprint);
  Tensor input = empty({kBytes}, kUInt8);
  std::memcpy(input.data_ptr(), &mine, kBytes);
  const Device device = wrapped_->collective_device();
  input = input.to(device);
  Tensor gathered = empty({kBytes * size_}, TensorOptions(kUInt8, device));
  const WorkPtr exchange = wrapped_->allgather_base(gathered, input);
  exchanged_bytes_.fetch_add(kBytes, std::memory_order_relaxed);
  const auto op = static_cast<OpType>(mine.op);
  // The collective takes the number after its exchange's: nothing starts between them.
  const auto verdict = [exchange, gathered, rank = rank_, size = size_, name = group_name()] {
    return compare(gathered, exchange->sequence_number() + 1, rank, size, name);
  };
  // An exchange that fails (a rank that never arrives times out there) names what it checked.
  const auto failed = [mine, exchange](const std::exception_ptr& error) {
    CollectiveFingerprint named = mine;
    named.sequence_number = exchange->sequence_number() + 1;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return std::make_exception_ptr(
          Error(detail::str_cat("the DETAIL fingerprint exchange before ", named.str(), " failed: ", e.what())));
    } catch (...) {
      return error;
    }
  };
  if (exchange->get_future()->completed()) {
    // It ran at once (issued from a callback on the MPI worker) or is queued on a stream (NCCL,
    // whose Future completes when queued): check here, then hand the collective over.
    try {
      exchange->wait();
    } catch (const std::exception&) {
      return completed_work(op, kUnassignedSequenceNumber, {}, failed(std::current_exception()));
    }
    if (std::exception_ptr mismatch = verdict())
      return completed_work(op, exchange->sequence_number() + 1, {}, mismatch);
    return run();
  }
  // Queued behind earlier collectives (MPI): the check and the collective run where the exchange
  // completes, so the caller does not block, and the Work returned follows the collective's.
  auto work = std::make_shared<Work>(op, kUnassignedSequenceNumber, std::vector<Tensor>{}, std::vector<Device>{device});
  exchange->get_future()->add_callback([work, verdict, failed, run = std::move(run), exchange](Future& done) {
    if (done.has_error()) return work->finish(failed(done.exception()));
    work->set_sequence_number(exchange->sequence_number() + 1);
    if (std::exception_ptr mismatch = verdict()) return work->finish(mismatch);
    WorkPtr collective;
    try {
      collective = run();
    } catch (const std::exception&) {
      return work->finish(std::current_exception());
    }
    collective->get_future()->add_callback([work](Future& f) { work->finish_like(f); });
  });
  return work;
}

// ---- each collective: its fingerprint, then the wrapped group's ----------------------------------
// The tensors, reduction and root that a fingerprint records are those the collective's ranks must
// agree on; allgather's and alltoall's inputs may differ in size between ranks.

WorkPtr ProcessGroupWrapper::run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) {
  return checked(fingerprint(OpType::kBroadcast, tensors, -1, static_cast<int>(opts.root_rank)),
                 [inner = wrapped_.get(), tensors, opts]() mutable { return inner->run_broadcast(tensors, opts); });
}

WorkPtr ProcessGroupWrapper::run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) {
  return checked(fingerprint(OpType::kAllreduce, tensors, static_cast<int>(opts.reduce_op)),
                 [inner = wrapped_.get(), tensors, opts]() mutable { return inner->run_allreduce(tensors, opts); });
}

WorkPtr ProcessGroupWrapper::run_allreduce_coalesced(std::vector<Tensor>& tensors,
                                                     const AllreduceCoalescedOptions& opts) {
  return checked(
      fingerprint(OpType::kAllreduceCoalesced, tensors, static_cast<int>(opts.reduce_op)),
      [inner = wrapped_.get(), tensors, opts]() mutable { return inner->run_allreduce_coalesced(tensors, opts); });
}

WorkPtr ProcessGroupWrapper::run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) {
  return checked(
      fingerprint(OpType::kReduce, tensors, static_cast<int>(opts.reduce_op), static_cast<int>(opts.root_rank)),
      [inner = wrapped_.get(), tensors, opts]() mutable { return inner->run_reduce(tensors, opts); });
}

WorkPtr ProcessGroupWrapper::run_allgather(std::vector<std::vector<Tensor>>& output_tensors,
                                           std::vector<Tensor>& input_tensors, const AllgatherOptions& opts) {
  return checked(fingerprint(OpType::kAllgather, input_tensors, -1, -1, /*sizes_may_differ=*/true),
                 [inner = wrapped_.get(), output_tensors, input_tensors, opts]() mutable {
                   return inner->run_allgather(output_tensors, input_tensors, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) {
  return checked(fingerprint(OpType::kAllgatherBase, {input}), [inner = wrapped_.get(), output, input, opts]() mutable {
    return inner->run_allgather_base(output, input, opts);
  });
}

WorkPtr ProcessGroupWrapper::run_allgather_coalesced(std::vector<std::vector<Tensor>>& output_lists,
                                                     std::vector<Tensor>& input_list, const AllgatherOptions& opts) {
  return checked(fingerprint(OpType::kAllgatherCoalesced, input_list),
                 [inner = wrapped_.get(), output_lists, input_list, opts]() mutable {
                   return inner->run_allgather_coalesced(output_lists, input_list, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_gather(std::vector<std::vector<Tensor>>& output_tensors,
                                        std::vector<Tensor>& input_tensors, const GatherOptions& opts) {
  return checked(fingerprint(OpType::kGather, input_tensors, -1, static_cast<int>(opts.root_rank)),
                 [inner = wrapped_.get(), output_tensors, input_tensors, opts]() mutable {
                   return inner->run_gather(output_tensors, input_tensors, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_scatter(std::vector<Tensor>& output_tensors,
                                         std::vector<std::vector<Tensor>>& input_tensors, const ScatterOptions& opts) {
  return checked(fingerprint(OpType::kScatter, output_tensors, -1, static_cast<int>(opts.root_rank)),
                 [inner = wrapped_.get(), output_tensors, input_tensors, opts]() mutable {
                   return inner->run_scatter(output_tensors, input_tensors, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_reduce_scatter(std::vector<Tensor>& output_tensors,
                                                std::vector<std::vector<Tensor>>& input_tensors,
                                                const ReduceScatterOptions& opts) {
  return checked(fingerprint(OpType::kReduceScatter, input_tensors[0], static_cast<int>(opts.reduce_op)),
                 [inner = wrapped_.get(), output_tensors, input_tensors, opts]() mutable {
                   return inner->run_reduce_scatter(output_tensors, input_tensors, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) {
  return checked(fingerprint(OpType::kReduceScatterBase, {input}, static_cast<int>(opts.reduce_op)),
                 [inner = wrapped_.get(), output, input, opts]() mutable {
                   return inner->run_reduce_scatter_base(output, input, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_alltoall_base(Tensor& output, Tensor& input,
                                               const std::vector<int64_t>& output_split_sizes,
                                               const std::vector<int64_t>& input_split_sizes,
                                               const AllToAllOptions& opts) {
  return checked(fingerprint(OpType::kAlltoallBase, {input}, -1, -1,
                             /*sizes_may_differ=*/!input_split_sizes.empty() || !output_split_sizes.empty()),
                 [inner = wrapped_.get(), output, input, output_split_sizes, input_split_sizes, opts]() mutable {
                   return inner->run_alltoall_base(output, input, output_split_sizes, input_split_sizes, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_alltoall(std::vector<Tensor>& output_tensors, std::vector<Tensor>& input_tensors,
                                          const AllToAllOptions& opts) {
  return checked(fingerprint(OpType::kAlltoall, input_tensors, -1, -1, /*sizes_may_differ=*/true),
                 [inner = wrapped_.get(), output_tensors, input_tensors, opts]() mutable {
                   return inner->run_alltoall(output_tensors, input_tensors, opts);
                 });
}

WorkPtr ProcessGroupWrapper::run_barrier(const BarrierOptions& opts) {
  return checked(fingerprint(OpType::kBarrier, {}),
                 [inner = wrapped_.get(), opts]() mutable { return inner->run_barrier(opts); });
}

WorkPtr ProcessGroupWrapper::run_send(std::vector<Tensor>& tensors, int dst_rank, int tag) {
  return wrapped_->run_send(tensors, dst_rank, tag);
}

WorkPtr ProcessGroupWrapper::run_recv(std::vector<Tensor>& tensors, int src_rank, int tag) {
  return wrapped_->run_recv(tensors, src_rank, tag);
}

ProcessGroupPtr ProcessGroupWrapper::run_new_subgroup(const std::vector<int>& ranks, Options options) {
  return wrapped_->new_subgroup(ranks, std::move(options));  // wrapped there when DETAIL
}

}  // namespace ember::distributed
