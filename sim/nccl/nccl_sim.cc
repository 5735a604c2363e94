// The simulated NCCL (include/nccl.h): every communicator is an MPI communicator over the same
// processes, found by a rendezvous on MPI_COMM_WORLD keyed by the unique id, and every collective is
// the matching nonblocking MPI collective, polled until it completes or the communicator is
// aborted. float16 and bfloat16 are reduced in float32 and rounded once, as NCCL's two-rank ring
// does. Buffers must be (simulated) device memory, as NCCL requires. A call returns once it is
// checked; the collective itself runs when its stream reaches it, on the stream's thread (Note
// [Simulated streams], sim/cuda/streams.cc), and a failure there is the communicator's
// asynchronous error (ncclCommGetAsyncError), as on a GPU.
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "distributed/poll_backoff.h"
#include "tensor/half.h"


struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int nranks = 0;
  int device = 0;
  std::atomic<bool> aborted{false};
  std::atomic<int> in_flight{0};  // calls polling right now; ncclCommAbort waits for them
  std::atomic<int> async_error{ncclSuccess};
  std::mutex mutex;
  std::string last_error;  // guarded by mutex
};

namespace {

thread_local std::string t_last_error;

ncclResult_t fail(ncclComm* comm, ncclResult_t result, std::string message) {
  t_last_error = message;
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->last_error = std::move(message);
  }
  return result;
}

// The id: a magic word, the world rank that made it and a per-process serial number.
struct IdBody {
  uint32_t magic;
  int32_t root_world_rank;
  uint32_t serial;
};
constexpr uint32_t kIdMagic = 0x4e43434c;  // "NCCL"

int rendezvous_tag(const IdBody& id) {
  // A tag of its own per id, so two communicators being created cannot take each other's messages.
  return 1000 + static_cast<int>((static_cast<uint64_t>(id.root_world_rank) * 1000003u + id.serial) % 1000000u);
}

bool mpi_ready() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

size_t element_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

bool is_16bit_float(ncclDataType_t t) { return t == ncclFloat16 || t == ncclBfloat16; }

// The MPI type a reduction runs in (16-bit floats are widened to float32 first).
MPI_Datatype reduction_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat16: case ncclBfloat16: case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: case ncclAvg: return MPI_SUM;
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

void widen(const void* src, float* dst, size_t n, ncclDataType_t t) {
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    dst[i] = t == ncclFloat16 ? ember::detail::half_bits_to_float(bits[i])
                              : ember::detail::bfloat16_bits_to_float(bits[i]);
  }
}

void narrow(const float* src, void* dst, size_t n, ncclDataType_t t) {
  uint16_t* bits = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = t == ncclFloat16 ? ember::detail::float_to_half_bits(src[i])
                               : ember::detail::float_to_bfloat16_bits(src[i]);
  }
}

// Divides n elements of a reduction buffer by `by` (ncclAvg).
void divide(void* data, size_t n, MPI_Datatype type, int by) {
  auto each = [&](auto* p) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::remove_reference_t<decltype(*p)>>(p[i] / by);
  };
  if (type == MPI_FLOAT) each(static_cast<float*>(data));
  else if (type == MPI_DOUBLE) each(static_cast<double*>(data));
  else if (type == MPI_INT8_T) each(static_cast<int8_t*>(data));
  else if (type == MPI_UINT8_T) each(static_cast<uint8_t*>(data));
  else if (type == MPI_INT32_T) each(static_cast<int32_t*>(data));
  else if (type == MPI_UINT32_T) each(static_cast<uint32_t*>(data));
  else if (type == MPI_INT64_T) each(static_cast<int64_t*>(data));
  else if (type == MPI_UINT64_T) each(static_cast<uint64_t*>(data));
}

// One call: `post` starts its MPI requests, `finish` runs once they completed (rounding, ncclAvg).
struct Op {
  const char* name;
  ncclComm* comm;
  std::function<int(std::vector<MPI_Request>&)> post;  // returns an MPI error code
  std::function<void()> finish;
  // What the call writes, for the simulator's initcheck (Note [Simulated compute-sanitizer]).
  void* written = nullptr;
  size_t written_bytes = 0;
};

thread_local int t_group_depth = 0;
thread_local std::vector<Op> t_group_ops;
thread_local cudaStream_t t_group_stream = nullptr;  // the first grouped call's

// Posts every op, polls until all completed or one communicator was aborted, then finishes them.
ncclResult_t run(std::vector<Op> ops) {
  // MPI reads and writes the device buffers while the requests are in flight.
  ember::cudasim::DeviceAccess access;
  for (Op& op : ops) op.comm->in_flight.fetch_add(1);
  auto leave = [&] {
    for (Op& op : ops) op.comm->in_flight.fetch_sub(1);
  };
  std::vector<MPI_Request> requests;
  for (Op& op : ops) {
    if (op.comm->aborted.load()) {
      leave();
      return fail(op.comm, ncclInvalidUsage, std::string(op.name) + ": the communicator was aborted");
    }
    const int rc = op.post(requests);
    if (rc != MPI_SUCCESS) {
      op.comm->async_error.store(ncclSystemError);
      leave();
      return fail(op.comm, ncclSystemError, std::string(op.name) + ": MPI failed to start it");
    }
  }
  // Note [Polling without spinning]: 64 spins, then yields for about as long as the 100000 polls
  // it yielded between before it slept (a stalled peer is found by the caller's watchdog).
  ember::distributed::PollBackoffOptions polling;
  polling.spin_polls = 64;
  polling.yield_for = std::chrono::milliseconds(100);
  polling.sleep = std::chrono::microseconds(100);
  polling.slow_after = std::chrono::nanoseconds::max();
  ember::distributed::PollBackoff backoff(polling);
  while (true) {
    int done = 0;
    if (MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                    MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      for (Op& op : ops) op.comm->async_error.store(ncclSystemError);
      leave();
      return fail(ops.front().comm, ncclSystemError, std::string(ops.front().name) + ": MPI failed");
    }
    if (done) break;
    for (Op& op : ops) {
      if (op.comm->aborted.load()) {
        // The requests stay posted: the communicator is never used or freed again.
        leave();
        return fail(op.comm, ncclSystemError,
                    std::string(op.name) + ": the communicator was aborted while the call waited for its peers");
      }
    }
    backoff.pause();
  }
  for (Op& op : ops) {
    if (op.finish) op.finish();
    if (op.written != nullptr) ember::cudasim::mark_written(op.written, op.written_bytes);
  }
  leave();
  return ncclSuccess;
}

// Runs `ops` when `stream` reaches them; a failure becomes each communicator's asynchronous error.
ncclResult_t enqueue_on(cudaStream_t stream, std::vector<Op> ops) {
  for (const Op& op : ops) {
    if (op.comm->aborted.load()) {
      return fail(op.comm, ncclInvalidUsage, std::string(op.name) + ": the communicator was aborted");
    }
  }
  ember::cudasim::enqueue_host_work(stream, [ops = std::move(ops)]() mutable {
    std::vector<ncclComm*> comms;
    for (const Op& op : ops) comms.push_back(op.comm);
    const ncclResult_t result = run(std::move(ops));
    if (result == ncclSuccess) return std::string();
    for (ncclComm* comm : comms) {
      int expected = ncclSuccess;
      comm->async_error.compare_exchange_strong(expected, result);
    }
    return std::string(ncclGetErrorString(result)) + ": " + t_last_error;
  });
  return ncclSuccess;
}

ncclResult_t submit(Op op, cudaStream_t stream) {
  if (t_group_depth > 0) {
    if (t_group_ops.empty()) t_group_stream = stream;
    t_group_ops.push_back(std::move(op));
    return ncclSuccess;
  }
  std::vector<Op> ops;
  ops.push_back(std::move(op));
  return enqueue_on(stream, std::move(ops));
}

// The checks every call makes; `bytes` of each buffer must be device memory.
ncclResult_t check_call(const char* name, ncclComm* comm, ncclDataType_t type,
                        std::initializer_list<std::pair<const void*, size_t>> buffers) {
  if (comm == nullptr) return fail(nullptr, ncclInvalidArgument, std::string(name) + ": null communicator");
  if (element_size(type) == 0) return fail(comm, ncclInvalidArgument, std::string(name) + ": invalid datatype");
  for (const auto& [ptr, bytes] : buffers) {
    if (bytes > 0 && !ember::cudasim::is_device_range(ptr, bytes)) {
      return fail(comm, ncclInvalidArgument,
                  std::string(name) + ": a buffer is not device memory of " + std::to_string(bytes) + " bytes");
    }
  }
  return ncclSuccess;
}

// A reduction into `recv` (count elements per rank's part); 16-bit floats go through float32.
struct Staging {
  std::vector<float> in, out;
};

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return t_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: null id");
  if (!mpi_ready()) {
    return fail(nullptr, ncclSystemError,
                "ncclGetUniqueId: the simulated NCCL carries its calls over MPI, which is not initialised");
  }
  static std::atomic<uint32_t> serial{0};
  IdBody body{kIdMagic, 0, serial.fetch_add(1)};
  MPI_Comm_rank(MPI_COMM_WORLD, &body.root_world_rank);
  std::memset(unique_id->internal, 0, NCCL_UNIQUE_ID_BYTES);
  std::memcpy(unique_id->internal, &body, sizeof(body));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  if (comm == nullptr) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: null comm");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) +
                                                  " of " + std::to_string(nranks) + " is out of range");
  }
  if (!mpi_ready()) return fail(nullptr, ncclSystemError, "ncclCommInitRank: MPI is not initialised");
  IdBody id;
  std::memcpy(&id, comm_id.internal, sizeof(id));
  if (id.magic != kIdMagic) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: not a unique id");
  const int tag = rendezvous_tag(id);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // Rank r's world rank, for every r: gathered at the id's maker, then sent to each member.
  std::vector<int> table(nranks, -1);
  int mine[2] = {rank, world_rank};
  if (world_rank == id.root_world_rank) {
    if (rank != 0) return fail(nullptr, ncclInvalidUsage, "ncclCommInitRank: the id's maker must be rank 0");
    table[0] = world_rank;
    for (int i = 1; i < nranks; ++i) {
      int theirs[2];
      MPI_Recv(theirs, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (theirs[0] <= 0 || theirs[0] >= nranks || table[theirs[0]] != -1) {
        return fail(nullptr, ncclInvalidUsage,
                    "ncclCommInitRank: rank " + std::to_string(theirs[0]) + " joined twice or is out of range");
      }
      table[theirs[0]] = theirs[1];
    }
    for (int r = 1; r < nranks; ++r) {
      MPI_Send(table.data(), nranks, MPI_INT, table[r], tag, MPI_COMM_WORLD);
    }
  } else {
    MPI_Send(mine, 2, MPI_INT, id.root_world_rank, tag, MPI_COMM_WORLD);
    MPI_Recv(table.data(), nranks, MPI_INT, id.root_world_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, table.data(), &group);
  auto result = std::make_unique<ncclComm>();
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &result->comm);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (rc != MPI_SUCCESS) return fail(nullptr, ncclSystemError, "ncclCommInitRank: MPI_Comm_create_group failed");
  result->rank = rank;
  result->nranks = nranks;
  cudaGetDevice(&result->device);
  *comm = result.release();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!comm->aborted.load() && mpi_ready()) MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->aborted.store(true);
  int expected = ncclSuccess;
  comm->async_error.compare_exchange_strong(expected, ncclSystemError);
  // A call blocked on the aborted communicator returns; only then may the communicator go.
  while (comm->in_flight.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  delete comm;  // its MPI communicator may still have requests posted: never freed
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return ncclInvalidArgument;
  *async_error = static_cast<ncclResult_t>(comm->async_error.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * element_size(datatype);
  if (auto r = check_call("ncclAllReduce", comm, datatype, {{sendbuff, bytes}, {recvbuff, bytes}})) return r;
  if (mpi_op(op) == MPI_OP_NULL) return fail(comm, ncclInvalidArgument, "ncclAllReduce: invalid op");
  auto staging = std::make_shared<Staging>();
  const MPI_Datatype type = reduction_type(datatype);
  return submit({"ncclAllReduce", comm,
                 [=](std::vector<MPI_Request>& requests) {
                   requests.emplace_back();
                   if (is_16bit_float(datatype)) {
                     staging->in.resize(count);
                     widen(sendbuff, staging->in.data(), count, datatype);
                     return MPI_Iallreduce(MPI_IN_PLACE, staging->in.data(), static_cast<int>(count),
                                           type, mpi_op(op), comm->comm, &requests.back());
                   }
                   if (sendbuff != recvbuff) std::memcpy(recvbuff, sendbuff, bytes);
                   return MPI_Iallreduce(MPI_IN_PLACE, recvbuff, static_cast<int>(count), type,
                                         mpi_op(op), comm->comm, &requests.back());
                 },
                 [=] {
                   void* data = is_16bit_float(datatype) ? static_cast<void*>(staging->in.data()) : recvbuff;
                   if (op == ncclAvg) divide(data, count, type, comm->nranks);
                   if (is_16bit_float(datatype)) narrow(staging->in.data(), recvbuff, count, datatype);
                 }, recvbuff, bytes}, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * element_size(datatype);
  if (comm != nullptr && (root < 0 || root >= comm->nranks)) {
    return fail(comm, ncclInvalidArgument, "ncclReduce: root " + std::to_string(root) + " out of range");
  }
  const bool is_root = comm != nullptr && comm->rank == root;
  if (auto r = check_call("ncclReduce", comm, datatype, {{sendbuff, bytes}, {is_root ? recvbuff : nullptr, is_root ? bytes : 0}})) return r;
  if (mpi_op(op) == MPI_OP_NULL) return fail(comm, ncclInvalidArgument, "ncclReduce: invalid op");
  auto staging = std::make_shared<Staging>();
  const MPI_Datatype type = reduction_type(datatype);
  const bool wide = is_16bit_float(datatype);
  return submit({"ncclReduce", comm,
                 [=](std::vector<MPI_Request>& requests) {
                   requests.emplace_back();
                   const void* in = sendbuff;
                   void* out = recvbuff;
                   if (wide) {
                     staging->in.resize(count);
                     staging->out.resize(count);
                     widen(sendbuff, staging->in.data(), count, datatype);
                     in = staging->in.data();
                     out = staging->out.data();
                   }
                   if (is_root && in == out) in = MPI_IN_PLACE;
                   return MPI_Ireduce(in, is_root ? out : nullptr, static_cast<int>(count), type,
                                      mpi_op(op), root, comm->comm, &requests.back());
                 },
                 [=] {
                   if (!is_root) return;
                   void* data = wide ? static_cast<void*>(staging->out.data()) : recvbuff;
                   if (op == ncclAvg) divide(data, count, type, comm->nranks);
                   if (wide) narrow(staging->out.data(), recvbuff, count, datatype);
                 }, is_root ? recvbuff : nullptr, bytes}, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * element_size(datatype);
  if (comm != nullptr && (root < 0 || root >= comm->nranks)) {
    return fail(comm, ncclInvalidArgument, "ncclBroadcast: root " + std::to_string(root) + " out of range");
  }
  const bool is_root = comm != nullptr && comm->rank == root;
  if (auto r = check_call("ncclBroadcast", comm, datatype, {{is_root ? sendbuff : nullptr, is_root ? bytes : 0}, {recvbuff, bytes}})) return r;
  return submit({"ncclBroadcast", comm, [=](std::vector<MPI_Request>& requests) {
                   if (is_root && sendbuff != recvbuff) std::memcpy(recvbuff, sendbuff, bytes);
                   requests.emplace_back();
                   return MPI_Ibcast(recvbuff, static_cast<int>(bytes), MPI_BYTE, root, comm->comm,
                                     &requests.back());
                 }, nullptr, recvbuff, bytes}, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = sendcount * element_size(datatype);
  const size_t total = comm != nullptr ? bytes * comm->nranks : 0;
  if (auto r = check_call("ncclAllGather", comm, datatype, {{sendbuff, bytes}, {recvbuff, total}})) return r;
  return submit({"ncclAllGather", comm, [=](std::vector<MPI_Request>& requests) {
                   // In place when sendbuff is this rank's slot of recvbuff, as NCCL allows.
                   char* slot = static_cast<char*>(recvbuff) + bytes * comm->rank;
                   const void* in = sendbuff == slot ? MPI_IN_PLACE : sendbuff;
                   requests.emplace_back();
                   return MPI_Iallgather(in, static_cast<int>(bytes), MPI_BYTE, recvbuff,
                                         static_cast<int>(bytes), MPI_BYTE, comm->comm, &requests.back());
                 }, nullptr, recvbuff, total}, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = recvcount * element_size(datatype);
  const size_t total = comm != nullptr ? bytes * comm->nranks : 0;
  if (auto r = check_call("ncclReduceScatter", comm, datatype, {{sendbuff, total}, {recvbuff, bytes}})) return r;
  if (mpi_op(op) == MPI_OP_NULL) return fail(comm, ncclInvalidArgument, "ncclReduceScatter: invalid op");
  auto staging = std::make_shared<Staging>();
  const MPI_Datatype type = reduction_type(datatype);
  const bool wide = is_16bit_float(datatype);
  return submit({"ncclReduceScatter", comm,
                 [=](std::vector<MPI_Request>& requests) {
                   const size_t n = recvcount * comm->nranks;
                   const void* in = sendbuff;
                   void* out = recvbuff;
                   if (wide) {
                     staging->in.resize(n);
                     staging->out.resize(recvcount);
                     widen(sendbuff, staging->in.data(), n, datatype);
                     in = staging->in.data();
                     out = staging->out.data();
                   } else if (static_cast<const char*>(sendbuff) + bytes * comm->rank == recvbuff) {
                     // In place (recvbuff is this rank's slot of sendbuff): reduce from a copy.
                     staging->in.resize((bytes * comm->nranks + sizeof(float) - 1) / sizeof(float));
                     std::memcpy(staging->in.data(), sendbuff, bytes * comm->nranks);
                     in = staging->in.data();
                   }
                   requests.emplace_back();
                   return MPI_Ireduce_scatter_block(in, out, static_cast<int>(recvcount), type,
                                                    mpi_op(op), comm->comm, &requests.back());
                 },
                 [=] {
                   void* data = wide ? static_cast<void*>(staging->out.data()) : recvbuff;
                   if (op == ncclAvg) divide(data, recvcount, type, comm->nranks);
                   if (wide) narrow(staging->out.data(), recvbuff, recvcount, datatype);
                 }, recvbuff, bytes}, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * element_size(datatype);
  if (auto r = check_call("ncclSend", comm, datatype, {{sendbuff, bytes}})) return r;
  if (peer < 0 || peer >= comm->nranks) return fail(comm, ncclInvalidArgument, "ncclSend: peer out of range");
  return submit({"ncclSend", comm, [=](std::vector<MPI_Request>& requests) {
                   requests.emplace_back();
                   return MPI_Isend(sendbuff, static_cast<int>(bytes), MPI_BYTE, peer, 0, comm->comm,
                                    &requests.back());
                 }, nullptr}, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const size_t bytes = count * element_size(datatype);
  if (auto r = check_call("ncclRecv", comm, datatype, {{recvbuff, bytes}})) return r;
  if (peer < 0 || peer >= comm->nranks) return fail(comm, ncclInvalidArgument, "ncclRecv: peer out of range");
  return submit({"ncclRecv", comm, [=](std::vector<MPI_Request>& requests) {
                   requests.emplace_back();
                   return MPI_Irecv(recvbuff, static_cast<int>(bytes), MPI_BYTE, peer, 0, comm->comm,
                                    &requests.back());
                 }, nullptr, recvbuff, bytes}, stream);
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Op> ops;
  ops.swap(t_group_ops);
  if (ops.empty()) return ncclSuccess;
  return enqueue_on(t_group_stream, std::move(ops));
}
