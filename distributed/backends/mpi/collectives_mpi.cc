// ProcessGroupMPI's collectives: ProcessGroup has checked the arguments on the caller's thread (Note
// [One lifecycle for every collective]); each is a queued entry whose `start` posts the nonblocking
// MPI call on the worker.
#include <algorithm>
#include <climits>

#include "distributed/backends/mpi/mpi_types.h"
#include "distributed/backends/mpi/process_group_mpi.h"
#include "distributed/utils.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

using mpi::mpi_datatype;
using mpi::mpi_op;

// Note [CUDA tensors through the MPI backend]
// MPI reads and writes host memory, so a CUDA tensor is staged through a pinned host buffer:
// copied in when its collective starts on the worker, copied back when it completes. Several ranks
// can then share one GPU, and CPU-only tools keep working; ProcessGroupNCCL is the backend that
// communicates from device memory. Ordering, as PyTorch's gloo backend does it for CUDA tensors:
// - in: enqueue() records an event on the caller's current stream and the worker waits for it
//   before staging, so kernels queued on any stream before the call have written the tensor;
// - out: the copy back is synchronous, and from pinned memory a synchronous copy has landed when
//   it returns, so whoever Work::wait()s then reads the result on any stream.
// The buffers come from the pinned host cache (tensor/cuda/caching_host_allocator.h): one
// cudaHostAlloc per size class, not one per collective (cuda_host_memory_stats() counts them).

// A contiguous pinned host copy of a CUDA tensor (Note [CUDA tensors through the MPI backend]).
Tensor pinned_host_copy(const Tensor& t) {
  Tensor host = empty_pinned(t.sizes(), t.dtype());
  copy_(host, t);
  return host;
}

// The host buffer of a flattened tensor list (Note [CUDA tensors through the MPI backend]).
Tensor host_flat(const std::vector<Tensor>& list) {
  Tensor flat = flatten_dense_tensors(list);
  return flat.is_cpu() ? flat : pinned_host_copy(flat);
}

// A host buffer MPI writes results into, pinned when they go on to CUDA tensors.
Tensor host_landing(int64_t numel, ScalarType dtype, const Tensor& destination) {
  return destination.is_cuda() ? empty_pinned({numel}, dtype) : empty({numel}, TensorOptions(dtype));
}

// A user tensor and the contiguous host buffer MPI reads/writes. Staging happens on the worker,
// when the collective runs, so the caller may fill the tensor up to the moment it is dequeued.
struct Staged {
  explicit Staged(Tensor t) : user(std::move(t)) {}
  void in() {
    if (!user.is_cpu()) {
      buf = pinned_host_copy(user);
    } else {
      buf = user.is_contiguous() ? user : user.contiguous();
    }
  }
  void out() const {
    if (!buf.is_same(user)) user.copy_(buf);
  }
  void* data() const { return buf.numel() > 0 ? buf.data_ptr() : nullptr; }
  Tensor user;
  Tensor buf;
};

int count_total(const std::vector<Tensor>& tensors) {
  const int64_t n = check_same_dtype_device(tensors, "ProcessGroupMPI");
  EMBER_CHECK(n <= INT_MAX, "ProcessGroupMPI: ", n, " elements exceed MPI's int count limit");
  return static_cast<int>(n);
}

void* data_of(const Tensor& t) { return t.numel() > 0 ? t.data_ptr() : nullptr; }

void divide_by(const Tensor& t, int world) {
  if (t.numel() > 0) t.div_(Scalar(static_cast<double>(world)));
}

std::vector<int> displacements(const std::vector<int>& counts) {
  std::vector<int> displs(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

}  // namespace

WorkPtr ProcessGroupMPI::run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) {
  auto s = std::make_shared<Staged>(tensors[0]);
  const int n = static_cast<int>(tensors[0].numel());
  const int root = static_cast<int>(opts.root_rank);
  MPI_Datatype dt = mpi_datatype(tensors[0].dtype());
  return enqueue(
      OpType::kBroadcast, tensors, tensors, opts.timeout, -1, root, false,
      [this, s, n, root, dt](std::vector<MPI_Request>& r) {
        s->in();
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Ibcast(s->data(), n, dt, root, comm_, &r.back()));
      },
      [s] { s->out(); });
}

WorkPtr ProcessGroupMPI::run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) {
  auto s = std::make_shared<Staged>(tensors[0]);
  const int n = static_cast<int>(tensors[0].numel());
  MPI_Datatype dt = mpi_datatype(tensors[0].dtype());
  MPI_Op op = mpi_op(opts.reduce_op, tensors[0].dtype(), "allreduce");
  const bool avg = opts.reduce_op == ReduceOp::kAvg;
  return enqueue(
      OpType::kAllreduce, tensors, tensors, opts.timeout, static_cast<int>(opts.reduce_op), -1,
      false,
      [this, s, n, dt, op](std::vector<MPI_Request>& r) {
        s->in();
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Iallreduce(MPI_IN_PLACE, s->data(), n, dt, op, comm_, &r.back()));
      },
      [this, s, avg] {
        if (avg) divide_by(s->buf, size_);
        s->out();
      });
}

WorkPtr ProcessGroupMPI::run_allreduce_coalesced(std::vector<Tensor>& tensors,
                                             const AllreduceCoalescedOptions& opts) {
  const int n = count_total(tensors);
  MPI_Datatype dt = mpi_datatype(tensors[0].dtype());
  MPI_Op op = mpi_op(opts.reduce_op, tensors[0].dtype(), "allreduce_coalesced");
  const bool avg = opts.reduce_op == ReduceOp::kAvg;
  auto flat = std::make_shared<Tensor>();
  std::vector<Tensor> list = tensors;
  return enqueue(
      OpType::kAllreduceCoalesced, tensors, tensors, opts.timeout,
      static_cast<int>(opts.reduce_op), -1, false,
      [this, flat, list, n, dt, op](std::vector<MPI_Request>& r) {
        *flat = host_flat(list);
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Iallreduce(MPI_IN_PLACE, data_of(*flat), n, dt, op, comm_, &r.back()));
      },
      [this, flat, list, avg] {
        if (avg) divide_by(*flat, size_);
        copy_from_flat(*flat, list);
      });
}

WorkPtr ProcessGroupMPI::run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) {
  auto s = std::make_shared<Staged>(tensors[0]);
  const int n = static_cast<int>(tensors[0].numel());
  const int root = static_cast<int>(opts.root_rank);
  MPI_Datatype dt = mpi_datatype(tensors[0].dtype());
  MPI_Op op = mpi_op(opts.reduce_op, tensors[0].dtype(), "reduce");
  const bool avg = opts.reduce_op == ReduceOp::kAvg;
  return enqueue(
      OpType::kReduce, tensors, tensors, opts.timeout, static_cast<int>(opts.reduce_op), root,
      false,
      [this, s, n, root, dt, op](std::vector<MPI_Request>& r) {
        s->in();
        r.emplace_back();
        // Only the root receives; the other ranks' tensors are left unchanged.
        const bool is_root = rank_ == root;
        EMBER_MPI_CALL(MPI_Ireduce(is_root ? MPI_IN_PLACE : s->data(), is_root ? s->data() : nullptr,
                                   n, dt, op, root, comm_, &r.back()));
      },
      [this, s, root, avg] {
        if (rank_ != root) return;
        if (avg) divide_by(s->buf, size_);
        s->out();
      });
}

WorkPtr ProcessGroupMPI::run_allgather(std::vector<std::vector<Tensor>>& output_tensors,
                                   std::vector<Tensor>& input_tensors,
                                   const AllgatherOptions& opts) {
  const Tensor input = input_tensors[0];
  std::vector<Tensor> outputs = output_tensors[0];
  std::vector<int> counts;
  for (const auto& o : outputs) {
    counts.push_back(static_cast<int>(o.numel()));
  }
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts[0]; });
  const int total = count_total(outputs);
  MPI_Datatype dt = mpi_datatype(input.dtype());
  auto s = std::make_shared<Staged>(input);
  auto flat = std::make_shared<Tensor>();
  // Nonblocking v-collectives read the count arrays until completion: they live in the closure.
  std::vector<int> displs = displacements(counts);
  return enqueue(
      OpType::kAllgather, input_tensors, outputs, opts.timeout, -1, -1, /*sizes_may_differ=*/true,
      [this, s, flat, outputs, counts, displs, equal, total, dt](std::vector<MPI_Request>& r) {
        s->in();
        *flat = host_landing(total, s->buf.dtype(), outputs[0]);
        r.emplace_back();
        if (equal) {
          // The common case (DDP, sharded states): MPI's regular allgather has better algorithms.
          EMBER_MPI_CALL(MPI_Iallgather(s->data(), counts[rank_], dt, data_of(*flat), counts[0], dt,
                                        comm_, &r.back()));
        } else {
          EMBER_MPI_CALL(MPI_Iallgatherv(s->data(), counts[rank_], dt, data_of(*flat), counts.data(),
                                         displs.data(), dt, comm_, &r.back()));
        }
      },
      [flat, outputs] { copy_from_flat(*flat, outputs); });
}

WorkPtr ProcessGroupMPI::run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) {
  const int n = static_cast<int>(input.numel());
  MPI_Datatype dt = mpi_datatype(input.dtype());
  auto in = std::make_shared<Staged>(input);
  auto out = std::make_shared<Staged>(output);
  return enqueue(
      OpType::kAllgatherBase, {input}, {output}, opts.timeout, -1, -1, false,
      [this, in, out, n, dt](std::vector<MPI_Request>& r) {
        in->in();
        out->in();
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Iallgather(in->data(), n, dt, out->data(), n, dt, comm_, &r.back()));
      },
      [out] { out->out(); });
}

WorkPtr ProcessGroupMPI::run_gather(std::vector<std::vector<Tensor>>& output_tensors,
                                std::vector<Tensor>& input_tensors, const GatherOptions& opts) {
  const int root = static_cast<int>(opts.root_rank);
  const Tensor input = input_tensors[0];
  std::vector<Tensor> outputs;
  if (rank_ == root) outputs = output_tensors[0];
  const int n = static_cast<int>(input.numel());
  MPI_Datatype dt = mpi_datatype(input.dtype());
  auto s = std::make_shared<Staged>(input);
  auto flat = std::make_shared<Tensor>();
  return enqueue(
      OpType::kGather, input_tensors, outputs, opts.timeout, -1, root, false,
      [this, s, flat, outputs, n, root, dt](std::vector<MPI_Request>& r) {
        s->in();
        if (rank_ == root) *flat = host_landing(static_cast<int64_t>(n) * size_, s->buf.dtype(), outputs[0]);
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Igather(s->data(), n, dt, rank_ == root ? data_of(*flat) : nullptr, n, dt,
                                   root, comm_, &r.back()));
      },
      [this, flat, outputs, root] {
        if (rank_ == root) copy_from_flat(*flat, outputs);
      });
}

WorkPtr ProcessGroupMPI::run_scatter(std::vector<Tensor>& output_tensors,
                                 std::vector<std::vector<Tensor>>& input_tensors,
                                 const ScatterOptions& opts) {
  const int root = static_cast<int>(opts.root_rank);
  const Tensor output = output_tensors[0];
  std::vector<Tensor> inputs;
  if (rank_ == root) inputs = input_tensors[0];
  const int n = static_cast<int>(output.numel());
  MPI_Datatype dt = mpi_datatype(output.dtype());
  auto s = std::make_shared<Staged>(output);
  auto flat = std::make_shared<Tensor>();
  return enqueue(
      OpType::kScatter, output_tensors, output_tensors, opts.timeout, -1, root, false,
      [this, s, flat, inputs, n, root, dt](std::vector<MPI_Request>& r) {
        s->in();
        if (rank_ == root) *flat = host_flat(inputs);
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Iscatter(rank_ == root ? data_of(*flat) : nullptr, n, dt, s->data(), n, dt,
                                    root, comm_, &r.back()));
      },
      [s] { s->out(); });
}

WorkPtr ProcessGroupMPI::run_reduce_scatter(std::vector<Tensor>& output_tensors,
                                        std::vector<std::vector<Tensor>>& input_tensors,
                                        const ReduceScatterOptions& opts) {
  const Tensor output = output_tensors[0];
  std::vector<Tensor> inputs = input_tensors[0];
  const int n = static_cast<int>(output.numel());
  MPI_Datatype dt = mpi_datatype(output.dtype());
  MPI_Op op = mpi_op(opts.reduce_op, output.dtype(), "reduce_scatter");
  const bool avg = opts.reduce_op == ReduceOp::kAvg;
  auto s = std::make_shared<Staged>(output);
  auto flat = std::make_shared<Tensor>();
  return enqueue(
      OpType::kReduceScatter, inputs, output_tensors, opts.timeout,
      static_cast<int>(opts.reduce_op), -1, false,
      [this, s, flat, inputs, n, dt, op](std::vector<MPI_Request>& r) {
        s->in();
        *flat = host_flat(inputs);
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Ireduce_scatter_block(data_of(*flat), s->data(), n, dt, op, comm_,
                                                 &r.back()));
      },
      [this, s, avg] {
        if (avg) divide_by(s->buf, size_);
        s->out();
      });
}

WorkPtr ProcessGroupMPI::run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) {
  const int n = static_cast<int>(output.numel());
  MPI_Datatype dt = mpi_datatype(output.dtype());
  MPI_Op op = mpi_op(opts.reduce_op, output.dtype(), "reduce_scatter_base");
  const bool avg = opts.reduce_op == ReduceOp::kAvg;
  auto in = std::make_shared<Staged>(input);
  auto out = std::make_shared<Staged>(output);
  return enqueue(
      OpType::kReduceScatterBase, {input}, {output}, opts.timeout, static_cast<int>(opts.reduce_op), -1, false,
      [this, in, out, n, dt, op](std::vector<MPI_Request>& r) {
        in->in();
        out->in();
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Ireduce_scatter_block(in->data(), out->data(), n, dt, op, comm_, &r.back()));
      },
      [this, out, avg] {
        if (avg) divide_by(out->buf, size_);
        out->out();
      });
}

WorkPtr ProcessGroupMPI::run_alltoall_base(Tensor& output, Tensor& input,
                                       const std::vector<int64_t>& output_split_sizes,
                                       const std::vector<int64_t>& input_split_sizes,
                                       const AllToAllOptions& opts) {
  // Element counts per peer: a split is a number of rows along dim 0 (checked by alltoall_base).
  auto counts_for = [&](const Tensor& t, const std::vector<int64_t>& splits) {
    std::vector<int> counts(size_, static_cast<int>(t.numel() / size_));
    const int64_t row = t.size(0) > 0 ? t.numel() / t.size(0) : 0;
    for (size_t r = 0; r < splits.size(); ++r) counts[r] = static_cast<int>(splits[r] * row);
    return counts;
  };
  std::vector<int> send_counts = counts_for(input, input_split_sizes);
  std::vector<int> recv_counts = counts_for(output, output_split_sizes);
  std::vector<int> send_displs = displacements(send_counts);
  std::vector<int> recv_displs = displacements(recv_counts);
  MPI_Datatype dt = mpi_datatype(input.dtype());
  auto in = std::make_shared<Staged>(input);
  auto out = std::make_shared<Staged>(output);
  const bool uneven = !input_split_sizes.empty() || !output_split_sizes.empty();
  return enqueue(
      OpType::kAlltoallBase, {input}, {output}, opts.timeout, -1, -1, uneven,
      [this, in, out, send_counts, recv_counts, send_displs, recv_displs,
       dt](std::vector<MPI_Request>& r) {
        in->in();
        out->in();
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Ialltoallv(in->data(), send_counts.data(), send_displs.data(), dt,
                                      out->data(), recv_counts.data(), recv_displs.data(), dt,
                                      comm_, &r.back()));
      },
      [out] { out->out(); });
}

WorkPtr ProcessGroupMPI::run_alltoall(std::vector<Tensor>& output_tensors,
                                  std::vector<Tensor>& input_tensors, const AllToAllOptions& opts) {
  std::vector<int> send_counts, recv_counts;
  for (int r = 0; r < size_; ++r) {
    send_counts.push_back(static_cast<int>(input_tensors[r].numel()));
    recv_counts.push_back(static_cast<int>(output_tensors[r].numel()));
  }
  count_total(input_tensors);
  const int recv_total = count_total(output_tensors);
  std::vector<int> send_displs = displacements(send_counts);
  std::vector<int> recv_displs = displacements(recv_counts);
  MPI_Datatype dt = mpi_datatype(input_tensors[0].dtype());
  std::vector<Tensor> inputs = input_tensors, outputs = output_tensors;
  auto flat_in = std::make_shared<Tensor>();
  auto flat_out = std::make_shared<Tensor>();
  return enqueue(
      OpType::kAlltoall, input_tensors, output_tensors, opts.timeout, -1, -1, true,
      [this, inputs, outputs, flat_in, flat_out, recv_total, send_counts, recv_counts, send_displs,
       recv_displs, dt](std::vector<MPI_Request>& r) {
        *flat_in = host_flat(inputs);
        *flat_out = host_landing(recv_total, flat_in->dtype(), outputs[0]);
        r.emplace_back();
        EMBER_MPI_CALL(MPI_Ialltoallv(data_of(*flat_in), send_counts.data(), send_displs.data(), dt,
                                      data_of(*flat_out), recv_counts.data(), recv_displs.data(),
                                      dt, comm_, &r.back()));
      },
      [flat_out, outputs] { copy_from_flat(*flat_out, outputs); });
}

WorkPtr ProcessGroupMPI::run_barrier(const BarrierOptions& opts) {
  return enqueue(OpType::kBarrier, {}, {}, opts.timeout, -1, -1, false,
                 [this](std::vector<MPI_Request>& r) {
                   r.emplace_back();
                   EMBER_MPI_CALL(MPI_Ibarrier(comm_, &r.back()));
                 });
}

}  // namespace ember::distributed
