// A main() for ember's micro-benchmarks: runs the registered Google Benchmarks (5 repetitions by
// default) and ends with a table "op size ember baseline ratio" built from the median runs.
// Benchmarks are registered as "<op>/ember" and "<op>/<baseline>" with the size as their argument,
// and report their throughput in one rate counter (GFLOP/s or GB/s); ratio = ember / baseline.
#pragma once

#include <benchmark/benchmark.h>

namespace ember::bench {

// The name of the throughput counter every benchmark in a binary sets (e.g. "GB/s").
int run_with_ratio_table(int argc, char** argv, const char* rate_counter);

// Sets `counter` to units_per_iteration * iterations / seconds / 1e9 (GFLOP/s, GB/s).
void set_rate(benchmark::State& state, const char* counter, double units_per_iteration);

}  // namespace ember::bench
