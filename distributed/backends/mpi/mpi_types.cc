#include "distributed/backends/mpi/mpi_types.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include "tensor/half.h"

namespace ember::distributed::mpi {

// Note [Half precision over MPI]
// MPI has no 16-bit float types. float16 and bfloat16 travel as an opaque 2-byte contiguous
// datatype (so broadcast, gather, alltoall, ... move bits unchanged), and reductions use
// user-defined MPI_Ops that widen each pair of elements to float, combine them, and round back
// (round-to-nearest-even, tensor/half.h). The alternative -- converting the whole tensor to float32,
// reducing, and converting back -- rounds only once but doubles the bytes on the wire and needs a
// temporary buffer; the per-step rounding is what NCCL does for half too. A sum over N ranks thus
// rounds log2(N)..N-1 times, which the tests' tolerances allow for.
namespace {

MPI_Datatype g_half = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16 = MPI_DATATYPE_NULL;
// [dtype: 0 half, 1 bfloat16][op: SUM, PRODUCT, MIN, MAX]
MPI_Op g_ops[2][4];
std::once_flag g_once;
bool g_created = false;

template <typename T, int kOp>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  int i = 0;
#if defined(__F16C__)
  // The fp16 comm hook's sum: eight lanes at a time (same rounding as the scalar loop below).
  if constexpr (std::is_same_v<T, Half> && kOp == 0) {
    for (; i + 8 <= *len; i += 8) {
      const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
      const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b + i),
                       _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
    }
  }
#endif
  for (; i < *len; ++i) {
    const float x = static_cast<float>(a[i]);
    const float y = static_cast<float>(b[i]);
    float r;
    if constexpr (kOp == 0) r = x + y;
    else if constexpr (kOp == 1) r = x * y;
    else if constexpr (kOp == 2) r = std::min(x, y);
    else r = std::max(x, y);
    b[i] = T(r);
  }
}

template <typename T>
void create_ops(MPI_Op* ops) {
  MPI_Op_create(&reduce_16bit<T, 0>, /*commute=*/1, &ops[0]);
  MPI_Op_create(&reduce_16bit<T, 1>, 1, &ops[1]);
  MPI_Op_create(&reduce_16bit<T, 2>, 1, &ops[2]);
  MPI_Op_create(&reduce_16bit<T, 3>, 1, &ops[3]);
}

int op_slot(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return 0;
    case ReduceOp::kProduct: return 1;
    case ReduceOp::kMin: return 2;
    case ReduceOp::kMax: return 3;
  }
  return 0;
}

}  // namespace

// Defined with Note [Allreduce algorithm] below.
void configure_iallreduce_algorithm();
void release_algorithm_cvar();

void init_mpi_types() {
  std::call_once(g_once, [] {
    MPI_Type_contiguous(2, MPI_BYTE, &g_half);
    MPI_Type_commit(&g_half);
    MPI_Type_contiguous(2, MPI_BYTE, &g_bfloat16);
    MPI_Type_commit(&g_bfloat16);
    create_ops<Half>(g_ops[0]);
    create_ops<BFloat16>(g_ops[1]);
    g_created = true;
    configure_iallreduce_algorithm();
  });
}

void free_mpi_types() {
  release_algorithm_cvar();
  if (!g_created) return;
  MPI_Type_free(&g_half);
  MPI_Type_free(&g_bfloat16);
  for (auto& row : g_ops) {
    for (auto& op : row) MPI_Op_free(&op);
  }
  g_created = false;
}

MPI_Datatype mpi_datatype(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::kFloat32: return MPI_FLOAT;
    case ScalarType::kFloat64: return MPI_DOUBLE;
    case ScalarType::kFloat16: return g_half;
    case ScalarType::kBFloat16: return g_bfloat16;
    case ScalarType::kInt32: return MPI_INT32_T;
    case ScalarType::kInt64: return MPI_INT64_T;
    case ScalarType::kUInt8: return MPI_UINT8_T;
    case ScalarType::kBool: return MPI_C_BOOL;
  }
  EMBER_THROW("ProcessGroupMPI: no MPI datatype for dtype ", static_cast<int>(dtype));
}

MPI_Op mpi_op(ReduceOp op, ScalarType dtype, const char* collective) {
  if (dtype == kFloat16 || dtype == kBFloat16) {
    return g_ops[dtype == kFloat16 ? 0 : 1][op_slot(op)];
  }
  if (dtype == kBool) {
    // PyTorch's convention for bool: SUM/MAX act as logical or, PRODUCT/MIN as logical and.
    EMBER_CHECK(op != ReduceOp::kAvg, collective, ": ReduceOp AVG is not supported for dtype bool");
    return (op == ReduceOp::kSum || op == ReduceOp::kMax) ? MPI_LOR : MPI_LAND;
  }
  if (op == ReduceOp::kAvg) {
    EMBER_CHECK(is_floating_point(dtype), collective,
                ": ReduceOp AVG needs a floating-point tensor, got dtype ", dtype);
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kProduct: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

// Note [Allreduce algorithm]
// The worker must use nonblocking MPI_Iallreduce so the watchdog can time it out, but OpenMPI 4.1
// serves it from libnbc, whose default for fewer than 4 ranks or in-place buffers is a binomial
// reduce + broadcast: half the bandwidth of the ring that the blocking MPI_Allreduce (coll/tuned)
// uses. Measured with 2 ranks on 1-64 MiB: binomial 0.4-0.5x raw MPI_Allreduce, ring 0.96-1.0x, and
// at 2 ranks ring costs no latency (two steps either way). libnbc reads its algorithm from the MCA
// variable coll_libnbc_iallreduce_algorithm, which the MPI_T interface can write, so ember selects
// ring (1) once, when the first group is created -- unless the user set it in the environment.
// Once only: switching per call by message size was tried and breaks libnbc (MPI_ERR_TRUNCATE on
// later calls, apparently from schedules it caches per buffer), so the choice must never change
// while collectives run.
namespace {
MPI_T_cvar_handle g_algorithm_handle = MPI_T_CVAR_HANDLE_NULL;
}  // namespace

void configure_iallreduce_algorithm() {
  if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr) return;
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
  int index = -1;
  int count = 0;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS ||
      MPI_T_cvar_handle_alloc(index, nullptr, &g_algorithm_handle, &count) != MPI_SUCCESS) {
    MPI_T_finalize();
    g_algorithm_handle = MPI_T_CVAR_HANDLE_NULL;
    return;
  }
  const int ring = 1;
  MPI_T_cvar_write(g_algorithm_handle, &ring);
}

void release_algorithm_cvar() {
  if (g_algorithm_handle == MPI_T_CVAR_HANDLE_NULL) return;
  MPI_T_cvar_handle_free(&g_algorithm_handle);
  MPI_T_finalize();
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len) + " (MPI error " + std::to_string(code) + ")";
}

}  // namespace ember::distributed::mpi
