// DDPLoggingData: what DistributedDataParallel::get_ddp_logging_data() reports (PyTorch's
// DDPLoggingData): configuration, the bucket layout, rebuild and unused-parameter facts, and the
// last iteration's timings, including how much of the communication overlapped backward.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace ember::distributed {

// Note [Communication time]: what "communication" and "overlap" mean in every report (this struct,
// the metrics file, the INFO report, the walkthrough, the pictures). A bucket's span runs from its
// launch to its reduction; spans of different buckets overlap each other, so their sum can exceed
// the iteration. comm_wall_ms is the wall-clock union of the spans, never longer than backward;
// exposed_comm_ms is the part of it after the last gradient was ready (finalize_backward began),
// what overlap failed to hide: finalize's wait for the buckets, less its wake-up after the last
// one; overlap = 1 - exposed / wall.
struct IterationStats {
  double forward_ms = 0;        // DDP forward (module forward + buffer broadcast + graph walk)
  double backward_ms = 0;       // first autograd hook to the end of finalize_backward
  double comm_wall_ms = 0;      // wall-clock union of the bucket spans (launch -> reduced)
  double exposed_comm_ms = 0;   // the part of comm_wall_ms after finalize_backward began
  double overlap = 0;           // 1 - exposed_comm_ms / comm_wall_ms; 0 without communication
  // Trace-clock timestamps (µs): the first bucket's launch and the last autograd hook. Overlap
  // means first_launch_us < last_hook_us: communication started while gradients were still coming.
  double first_launch_us = 0;
  double last_hook_us = 0;
  // find_unused_parameters: the graph traversal from the outputs in this iteration's forward.
  double unused_search_ms = 0;
};

// The wall-clock length `spans` ([begin, end) pairs) cover, counting only time from `from` on: with
// the bucket spans, comm_wall_ms from the start and exposed_comm_ms from finalize_backward's.
double covered_length(std::vector<std::pair<double, double>> spans,
                      double from = -std::numeric_limits<double>::infinity());

// PyTorch's runtime statistics under its names (DDPLoggingData's ints_map), in nanoseconds, from
// the same five events its Reducer's Timer records: forward start (prepare_for_forward), backward
// compute start (prepare_for_backward), compute end (finalize_backward began), comm start (the
// first bucket launched) and comm end (the last bucket reduced). backward_comm_time is one
// interval, gaps between buckets included, so it is at least comm_wall_ms.
struct RuntimeStats {
  // The last synchronising iteration.
  int64_t forward_compute_time = 0;                // forward start -> backward compute start
  int64_t backward_compute_time = 0;               // backward compute start -> compute end
  int64_t backward_comm_time = 0;                  // comm start -> comm end
  int64_t backward_compute_comm_overlap_time = 0;  // comm start -> compute end; 0 if comm started later
  // Running means over every synchronising iteration (PyTorch samples the first ten and then one in
  // a hundred; ember averages them all).
  int64_t avg_forward_compute_time = 0;
  int64_t avg_backward_compute_time = 0;
  int64_t avg_backward_comm_time = 0;
  int64_t avg_backward_compute_comm_overlap_time = 0;
  int64_t num_iterations_stats_recorded = 0;
};

// When each gradient became ready and each bucket was reduced in one iteration, in ms from the
// first autograd hook: what the bucket-size advisor replays with other caps (first_iteration_report.h).
struct IterationTimeline {
  std::vector<double> param_ready_ms;  // by parameter index; -1: its hook did not fire
  std::vector<int64_t> param_bytes;    // by parameter index
  std::vector<double> bucket_launch_ms, bucket_done_ms;  // launch order
  std::vector<int64_t> bucket_bytes;
  double compute_end_ms = 0;  // finalize_backward began: the whole graph had run
};

// One rank's side of a straggler check (Note [Straggler check], straggler.h).
struct RankHealth {
  double link_next_mb_s = 0;  // measured to rank (r + 1) % world; 0 when the probe failed
  double link_prev_mb_s = 0;  // to rank (r - 1) mod world
  // Means over the iterations since the previous check:
  double compute_ms = 0;      // forward + backward - waiting for buckets
  double comm_wait_ms = 0;    // waiting for bucket reductions at the end of backward
};

// The last straggler check's findings.
struct StragglerReport {
  int64_t iteration = -1;  // the synchronising iteration it ran at; -1: none ran yet
  std::vector<RankHealth> ranks;
  std::vector<std::string> hosts;  // as each rank's side channel reported it
  std::vector<int> slow_link_ranks;
  std::vector<int> slow_compute_ranks;
  double median_link_mb_s = 0;   // over the links between different hosts
  double median_compute_ms = 0;
  // "rank 2 (host node-2): its links run at 6.1 MB/s at most, 9.8x slower than the links between
  // the other ranks (median 60.2 MB/s) -- a slow or congested network link"; "" when none.
  std::string summary;
  bool found() const { return !slow_link_ranks.empty() || !slow_compute_ranks.empty(); }
};

// What DistributedDataParallel::get_ddp_logging_data() returns (PyTorch's DDPLoggingData, as
// fields): configuration, bucket layouts, unused parameters, the last iteration's timings.
struct DDPLoggingData {
  int rank = 0;
  int world_size = 1;
  std::string backend;
  std::string comm_hook;
  int64_t bucket_cap_bytes = 0;
  int64_t first_bucket_bytes = 0;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  bool broadcast_buffers = true;
  int64_t num_parameters = 0;
  int64_t num_buckets = 0;
  // Buckets whose collective ran in the last iteration: num_buckets, less those
  // skip_all_reduce_unused_params skipped (PyTorch's num_buckets_reduced).
  int64_t num_buckets_reduced = 0;
  // The layout now (after the rebuild, once it happened): bytes and parameter indices per bucket,
  // in launch order.
  std::vector<int64_t> bucket_sizes;
  std::vector<std::vector<size_t>> bucket_indices;
  // The layout DDP's constructor built, used until the rebuild: one bucket per dtype unless
  // find_unused_parameters is on without static_graph (see distributed_data_parallel.cc).
  std::vector<int64_t> initial_bucket_sizes;
  std::vector<std::vector<size_t>> initial_bucket_indices;
  bool has_rebuilt_buckets = false;
  bool join_uneven_inputs = false;                 // trained under Join (PyTorch's join_uneven_inputs)
  int64_t num_iterations = 0;                      // forwards that synchronised gradients
  int64_t unused_parameter_count = 0;               // in the last iteration
  std::vector<std::string> unused_parameter_names;
  std::vector<size_t> unused_parameter_indices;     // the same, by parameter index
  IterationStats last;
  RuntimeStats runtime;  // PyTorch's names: avg_backward_comm_time, ...
  StragglerReport straggler;  // DDPOptions::straggler_check_every
};

}  // namespace ember::distributed
