// What the benchmark binaries report of repeated timings: the median (0 for none).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ember::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace ember::bench
