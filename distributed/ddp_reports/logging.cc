// docs/design.md step 12's statistics: Note [Communication time] (logging.h).
#include "distributed/ddp_reports/logging.h"

#include <algorithm>

namespace ember::distributed {

double covered_length(std::vector<std::pair<double, double>> spans, double from) {
  std::sort(spans.begin(), spans.end());
  double total = 0, covered_to = from;
  for (const auto& [begin, end] : spans) {
    const double start = std::max(begin, covered_to);
    if (end > start) total += end - start;
    covered_to = std::max(covered_to, end);
  }
  return total;
}

}  // namespace ember::distributed
