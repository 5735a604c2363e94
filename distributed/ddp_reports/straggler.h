// DDP's straggler check (an ember extension, off by default; DDPOptions::straggler_check_every):
// which rank holds the others back, named in get_ddp_logging_data().straggler.
// Note [Straggler check]
// Every N synchronising iterations, at the start of forward (the same point on every rank), each
// rank times sending DDPOptions::straggler_probe_bytes to its ring neighbours over the process
// group's side channel (Note [Side channel link probes]), then the ranks allgather what they
// measured with their mean compute and communication-wait times since the previous check. A slow link slows
// every rank's allreduce alike, so the collectives' own timings cannot say whose link it is; the
// probes can: a rank whose links are all slow, while links between other ranks are fast, is the
// straggler (it takes three hosts to tell which end of a slow link is slow). Probes between ranks
// on one host measure no network and are left out. A rank whose compute takes far longer than the
// others' is named too. Off under Join (a joined rank does not run forward).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/ddp_reports/logging.h"
#include "distributed/process_group.h"

namespace ember::distributed {

struct StragglerThresholds {
  // A rank's links are slow when even its fastest measured link is this many times slower than the
  // median of the links between other ranks.
  double link_ratio = 3.0;
  // A rank computes slowly when its compute time is this many times the median of the others'.
  double compute_ratio = 2.0;
};

// Classifies what every rank measured (ranks[r], hosts[r]). Pure, so the verdicts and the wording
// are unit-tested without a network.
StragglerReport find_stragglers(int64_t iteration, std::vector<RankHealth> ranks,
                                std::vector<std::string> hosts, StragglerThresholds thresholds = {});

// Runs one check on `group` (a collective: every rank calls it at the same point). `mine` carries
// this rank's mean compute and communication-wait times since the last check; the links are probed.
StragglerReport run_straggler_check(ProcessGroup& group, int64_t iteration, RankHealth mine,
                                    size_t probe_bytes);

}  // namespace ember::distributed
