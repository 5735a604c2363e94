// ProcessGroupNCCL's collectives: ProcessGroup has checked the arguments on the caller's thread (Note
// [One lifecycle for every collective]); each hands ProcessGroupNCCL::collective() the NCCL calls it
// issues on the communication stream (Note [NCCL streams and completion], process_group_nccl.cc).
#include <nccl.h>

#include "distributed/backends/nccl/process_group_nccl.h"
#include "distributed/utils.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

ncclDataType_t nccl_type(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32: return ncclFloat32;
    case ScalarType::kFloat64: return ncclFloat64;
    case ScalarType::kFloat16: return ncclFloat16;
    case ScalarType::kBFloat16: return ncclBfloat16;
    case ScalarType::kInt32: return ncclInt32;
    case ScalarType::kInt64: return ncclInt64;
    case ScalarType::kUInt8: return ncclUint8;
    case ScalarType::kBool: return ncclUint8;
  }
  return ncclUint8;
}

// PyTorch's mapping: AVG is NCCL's own; on bool, SUM and PRODUCT are "or" and "and" (MAX, MIN).
ncclRedOp_t nccl_op(ReduceOp op, ScalarType t) {
  const bool boolean = t == ScalarType::kBool;
  switch (op) {
    case ReduceOp::kSum: return boolean ? ncclMax : ncclSum;
    case ReduceOp::kAvg:
      EMBER_CHECK(!boolean, "ProcessGroupNCCL: AVG is not defined for bool tensors");
      return ncclAvg;
    case ReduceOp::kProduct: return boolean ? ncclMin : ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace

// Each collective hands collective() a launch step; `comm` is read there, after the broken check.
#define EMBER_NCCL_COMM static_cast<ncclComm_t>(comm_)

WorkPtr ProcessGroupNCCL::run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) {
  Tensor t = tensors[0];
  const int root = static_cast<int>(opts.root_rank);
  Steps steps;
  steps.launch = [this, t, root](void* stream) {
    return static_cast<int>(ncclBroadcast(t.data_ptr(), t.data_ptr(), count(t), nccl_type(t.dtype()), root,
                                          EMBER_NCCL_COMM, as_stream(stream)));
  };
  return collective(OpType::kBroadcast, tensors, tensors, opts.timeout, -1, root, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) {
  Tensor t = tensors[0];
  const ncclRedOp_t op = nccl_op(opts.reduce_op, t.dtype());
  Steps steps;
  steps.launch = [this, t, op](void* stream) {
    return static_cast<int>(ncclAllReduce(t.data_ptr(), t.data_ptr(), count(t), nccl_type(t.dtype()), op,
                                          EMBER_NCCL_COMM, as_stream(stream)));
  };
  return collective(OpType::kAllreduce, tensors, tensors, opts.timeout,
                    static_cast<int>(opts.reduce_op), -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_allreduce_coalesced(std::vector<Tensor>& tensors,
                                              const AllreduceCoalescedOptions& opts) {
  const ncclRedOp_t op = nccl_op(opts.reduce_op, tensors[0].dtype());
  auto flat = std::make_shared<Tensor>();
  std::vector<Tensor> list = tensors;
  Steps steps;
  steps.prepare = [flat, list] { *flat = flatten_dense_tensors(list); };
  steps.launch = [this, flat, op](void* stream) {
    return static_cast<int>(ncclAllReduce(flat->data_ptr(), flat->data_ptr(), count(*flat),
                                          nccl_type(flat->dtype()), op, EMBER_NCCL_COMM, as_stream(stream)));
  };
  steps.complete = [flat, list] { copy_from_flat(*flat, list); };
  return collective(OpType::kAllreduceCoalesced, tensors, tensors, opts.timeout,
                    static_cast<int>(opts.reduce_op), -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_reduce(std::vector<Tensor>& tensors, const ReduceOptions& opts) {
  Tensor t = tensors[0];
  const int root = static_cast<int>(opts.root_rank);
  const ncclRedOp_t op = nccl_op(opts.reduce_op, t.dtype());
  Steps steps;
  steps.launch = [this, t, op, root](void* stream) {
    return static_cast<int>(ncclReduce(t.data_ptr(), t.data_ptr(), count(t), nccl_type(t.dtype()), op, root,
                                       EMBER_NCCL_COMM, as_stream(stream)));
  };
  return collective(OpType::kReduce, tensors, tensors, opts.timeout, static_cast<int>(opts.reduce_op),
                    root, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_allgather(std::vector<std::vector<Tensor>>& output_tensors,
                                    std::vector<Tensor>& input_tensors, const AllgatherOptions& opts) {
  Tensor input = input_tensors[0];
  std::vector<Tensor> outputs = output_tensors[0];
  for (const auto& o : outputs) {
    EMBER_CHECK(o.numel() == input.numel(), op_label("allgather"), ": every output must have the "
                "input's ", input.numel(), " elements (NCCL gathers equal sizes), got ", o.describe(),
                " on rank ", rank_);
  }
  auto flat = std::make_shared<Tensor>();
  const int world = size_;
  Steps steps;
  steps.prepare = [flat, input, world] {
    *flat = empty({world * input.numel()}, TensorOptions(input.dtype(), input.device()));
  };
  steps.launch = [this, flat, input](void* stream) {
    return static_cast<int>(ncclAllGather(input.data_ptr(), flat->data_ptr(), count(input),
                                          nccl_type(input.dtype()), EMBER_NCCL_COMM, as_stream(stream)));
  };
  steps.complete = [flat, outputs] { copy_from_flat(*flat, outputs); };
  std::vector<Tensor> keep = outputs;
  return collective(OpType::kAllgather, input_tensors, std::move(keep), opts.timeout, -1, -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) {
  Tensor in = input, out = output;
  Steps steps;
  steps.launch = [this, in, out](void* stream) {
    return static_cast<int>(ncclAllGather(in.data_ptr(), out.data_ptr(), count(in), nccl_type(in.dtype()),
                                          EMBER_NCCL_COMM, as_stream(stream)));
  };
  return collective(OpType::kAllgatherBase, {input}, {output}, opts.timeout, -1, -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_reduce_scatter(std::vector<Tensor>& output_tensors,
                                         std::vector<std::vector<Tensor>>& input_tensors,
                                         const ReduceScatterOptions& opts) {
  Tensor output = output_tensors[0];
  std::vector<Tensor> inputs = input_tensors[0];
  const ncclRedOp_t op = nccl_op(opts.reduce_op, output.dtype());
  auto flat = std::make_shared<Tensor>();
  Steps steps;
  steps.prepare = [flat, inputs] { *flat = flatten_dense_tensors(inputs); };
  steps.launch = [this, flat, output, op](void* stream) {
    return static_cast<int>(ncclReduceScatter(flat->data_ptr(), output.data_ptr(), count(output),
                                              nccl_type(output.dtype()), op, EMBER_NCCL_COMM,
                                              as_stream(stream)));
  };
  return collective(OpType::kReduceScatter, inputs, output_tensors, opts.timeout,
                    static_cast<int>(opts.reduce_op), -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_reduce_scatter_base(Tensor& output, Tensor& input, const ReduceScatterOptions& opts) {
  Tensor in = input, out = output;
  const ncclRedOp_t op = nccl_op(opts.reduce_op, out.dtype());
  Steps steps;
  steps.launch = [this, in, out, op](void* stream) {
    return static_cast<int>(ncclReduceScatter(in.data_ptr(), out.data_ptr(), count(out), nccl_type(out.dtype()), op,
                                              EMBER_NCCL_COMM, as_stream(stream)));
  };
  return collective(OpType::kReduceScatterBase, {input}, {output}, opts.timeout, static_cast<int>(opts.reduce_op),
                    -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_alltoall_base(Tensor& output, Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes,
                                        const std::vector<int64_t>& input_split_sizes,
                                        const AllToAllOptions& opts) {
  EMBER_CHECK(output_split_sizes.empty() && input_split_sizes.empty(),
              op_label("alltoall_base"), ": only equal splits are supported (got explicit split sizes)");
  EMBER_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0,
              op_label("alltoall_base"), ": input ", input.describe(), " and output ", output.describe(),
              " must have the same number of elements (NCCL's equal splits)");
  Tensor in = input, out = output;
  const int world = size_;
  Steps steps;
  steps.launch = [this, in, out, world](void* stream) {
    const size_t chunk = count(in) / world;
    const size_t bytes = chunk * element_size(in.dtype());
    ncclGroupStart();
    int rc = ncclSuccess;
    for (int peer = 0; peer < world && rc == ncclSuccess; ++peer) {
      rc = ncclSend(static_cast<const char*>(in.data_ptr()) + peer * bytes, chunk, nccl_type(in.dtype()), peer,
                    EMBER_NCCL_COMM, as_stream(stream));
      if (rc == ncclSuccess) {
        rc = ncclRecv(static_cast<char*>(out.data_ptr()) + peer * bytes, chunk, nccl_type(out.dtype()), peer,
                      EMBER_NCCL_COMM, as_stream(stream));
      }
    }
    const int end = ncclGroupEnd();
    return rc != ncclSuccess ? rc : end;
  };
  return collective(OpType::kAlltoallBase, {input}, {output}, opts.timeout, -1, -1, std::move(steps));
}

WorkPtr ProcessGroupNCCL::run_barrier(const BarrierOptions& opts) {
  // As PyTorch's: an allreduce of one element on this rank's device; waiting on it is the barrier.
  Tensor one = zeros({1}, TensorOptions(kFloat32, Device(DeviceType::kCUDA, device_)));
  Steps steps;
  steps.launch = [this, one](void* stream) {
    return static_cast<int>(ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclFloat32, ncclSum,
                                          EMBER_NCCL_COMM, as_stream(stream)));
  };
  return collective(OpType::kBarrier, {one}, {}, opts.timeout, -1, -1, std::move(steps));
}

#undef EMBER_NCCL_COMM

}  // namespace ember::distributed
