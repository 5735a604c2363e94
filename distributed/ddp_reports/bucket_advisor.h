// docs/design.md steps 10-13 replayed: the bucket-size advisor of EMBER_DISTRIBUTED_DEBUG=INFO's report.
// From one measured iteration (when each gradient became ready, how long each bucket's reduction
// took) it predicts the backward's end with other bucket_cap_mb values and recommends one.
//
// Note [Bucket-size advisor model]: the model of bench/step_model.py (docs/step_model), run on this
// rank's own measurements instead of a trace:
//   1. gradients in the order they became ready, grouped as the rebuild does (step 13): the first
//      bucket closes at first_bucket_bytes, the others at the cap;
//   2. a bucket is ready when its last gradient is;
//   3. reductions run one after another in launch order (one communication thread or stream): a
//      bucket starts when it is ready and the previous one is done, and takes alpha + beta * bytes;
//   4. backward ends when both the graph has run (finalize_backward began) and the last bucket is
//      reduced.
// alpha and beta are fitted by least squares to the buckets' service times (done minus the later
// of launch and the previous bucket's done); with fewer than two bucket sizes or a fit that is not
// positive, beta is the mean time per byte and alpha half the shortest service time (said so).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/ddp_reports/logging.h"

namespace ember::distributed {

struct BucketCapPrediction {
  int64_t cap_bytes = 0;
  int64_t buckets = 0;
  double backward_ms = 0;  // predicted: first hook to the last bucket reduced (or the graph's end)
};

struct BucketCapAdvice {
  bool valid = false;       // false: the iteration had no gradient or bucket to learn from
  double alpha_ms = 0;      // per reduction
  double beta_ms_per_mb = 0;
  bool fitted = false;      // alpha and beta from a least-squares fit (else estimated, see the Note)
  int64_t fitted_buckets = 0;
  BucketCapPrediction current;  // the cap in use
  BucketCapPrediction best;
  std::vector<BucketCapPrediction> candidates;  // 0.25 MB ... 100 MB and the current cap
  // "bucket_cap_mb=1 would end backward in 10.1 ms instead of 12.3 ms (-2.2 ms, 18%)" or
  // "keep bucket_cap_mb=25: ...".
  std::string summary;
};

BucketCapAdvice advise_bucket_cap(const IterationTimeline& timeline, int64_t first_bucket_bytes,
                                  int64_t current_cap_bytes);

}  // namespace ember::distributed
