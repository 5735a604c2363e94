// DDP's straggler check (Note [Straggler check]); docs/design.md step 6 runs it before forward.
#include "distributed/ddp_reports/straggler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "distributed/diagnostics/stall_inspector.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

// A probe: from -> to at mb_s (0 when it failed).
struct Link {
  int from, to;
  double mb_s;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string who(int rank, const std::vector<std::string>& hosts) {
  const std::string& host = hosts[static_cast<size_t>(rank)];
  return detail::str_cat("rank ", rank, host.empty() ? "" : " (host " + host + ")");
}

// The probed links of the ring, both directions; probes between ranks of one host measure no
// network and are left out.
std::vector<Link> ring_links(const std::vector<RankHealth>& ranks, const std::vector<std::string>& hosts) {
  const int world = static_cast<int>(ranks.size());
  std::vector<Link> links;
  const auto add = [&](int from, int to, double mb_s) {
    if (to != from && (hosts[from].empty() || hosts[from] != hosts[to])) links.push_back({from, to, mb_s});
  };
  for (int r = 0; r < world; ++r) {
    const int next = (r + 1) % world, prev = (r - 1 + world) % world;
    add(r, next, ranks[r].link_next_mb_s);
    if (prev != next) add(r, prev, ranks[r].link_prev_mb_s);  // at world 2 they are one peer
  }
  return links;
}

// A link belongs to both ends' hosts: the verdict is per host (a rank whose ring neighbours share
// its host has only one link off it, which says nothing about which end is slow), and names every
// rank on it. Ranks without a reported host count as hosts of their own.
void judge_links(const std::vector<Link>& links, const std::vector<std::string>& hosts,
                 const StragglerThresholds& thresholds, StragglerReport& report, std::vector<std::string>& findings) {
  const int world = static_cast<int>(hosts.size());
  std::vector<std::string> key(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) key[r] = hosts[r].empty() ? "#" + std::to_string(r) : hosts[r];
  std::vector<std::string> judged;
  for (int x = 0; x < world; ++x) {
    if (std::find(judged.begin(), judged.end(), key[x]) != judged.end()) continue;
    judged.push_back(key[x]);
    std::vector<double> involving, others;
    for (const Link& l : links) {
      (key[l.from] == key[x] || key[l.to] == key[x] ? involving : others).push_back(l.mb_s);
    }
    if (involving.empty() || others.empty()) continue;  // nothing to compare with
    const double fastest = *std::max_element(involving.begin(), involving.end());
    const double reference = median(others);
    if (reference <= 0 || fastest * thresholds.link_ratio > reference) continue;
    std::vector<int> on_host;
    for (int r = 0; r < world; ++r) {
      if (key[r] == key[x]) on_host.push_back(r);
    }
    report.slow_link_ranks.insert(report.slow_link_ranks.end(), on_host.begin(), on_host.end());
    const std::string name = on_host.size() == 1 ? who(x, hosts)
                                                 : detail::str_cat("host ", hosts[x], " (", rank_list(on_host), ")");
    const std::string how =
        fastest > 0 ? detail::str_cat("its links run at ", fixed(fastest, 1), " MB/s at most, ",
                                      fixed(reference / fastest, 1), "x slower than")
                    : std::string("its link probes failed, against");
    findings.push_back(detail::str_cat(name, ": ", how, " the links between the other ",
                                       on_host.size() == 1 ? "ranks" : "hosts", " (median ",
                                       fixed(reference, 1), " MB/s) -- a slow or congested network link"));
  }
  std::sort(report.slow_link_ranks.begin(), report.slow_link_ranks.end());
}

// A rank computing compute_ratio times the others' median or longer.
void judge_compute(const std::vector<RankHealth>& ranks, const std::vector<std::string>& hosts,
                   const StragglerThresholds& thresholds, StragglerReport& report, std::vector<std::string>& findings) {
  const int world = static_cast<int>(ranks.size());
  for (int x = 0; x < world; ++x) {
    std::vector<double> others;
    for (int r = 0; r < world; ++r) {
      if (r != x) others.push_back(ranks[r].compute_ms);
    }
    const double reference = median(others);
    if (others.empty() || reference <= 0 || ranks[x].compute_ms < thresholds.compute_ratio * reference) continue;
    report.slow_compute_ranks.push_back(x);
    findings.push_back(detail::str_cat(who(x, hosts), ": computes for ", fixed(ranks[x].compute_ms, 1),
                                       " ms per iteration, ", fixed(ranks[x].compute_ms / reference, 1),
                                       "x the others' median (", fixed(reference, 1),
                                       " ms) -- an overloaded or slower machine"));
  }
}

}  // namespace

StragglerReport find_stragglers(int64_t iteration, std::vector<RankHealth> ranks,
                                std::vector<std::string> hosts, StragglerThresholds thresholds) {
  StragglerReport report;
  report.iteration = iteration;
  hosts.resize(ranks.size());
  const std::vector<Link> links = ring_links(ranks, hosts);
  std::vector<double> all_links;
  for (const Link& l : links) all_links.push_back(l.mb_s);
  report.median_link_mb_s = median(all_links);
  std::vector<double> all_compute;
  for (const RankHealth& h : ranks) all_compute.push_back(h.compute_ms);
  report.median_compute_ms = median(all_compute);
  std::vector<std::string> findings;
  judge_links(links, hosts, thresholds, report, findings);
  judge_compute(ranks, hosts, thresholds, report, findings);
  for (const std::string& f : findings) report.summary += (report.summary.empty() ? "" : "; ") + f;
  report.ranks = std::move(ranks);
  report.hosts = std::move(hosts);
  return report;
}

StragglerReport run_straggler_check(ProcessGroup& group, int64_t iteration, RankHealth mine,
                                    size_t probe_bytes) {
  const int rank = group.rank(), world = group.size();
  std::vector<std::string> hosts(static_cast<size_t>(world));
  if (const StallInspector* side = group.side_channel(); side != nullptr && world > 1) {
    const int next = (rank + 1) % world, prev = (rank - 1 + world) % world;
    std::vector<int> peers{next};
    if (prev != next) peers.push_back(prev);
    const std::vector<LinkMeasurement> m = side->probe_links(peers, probe_bytes, std::chrono::seconds(10));
    mine.link_next_mb_s = m[0].megabytes_per_second();
    mine.link_prev_mb_s = m.size() > 1 ? m[1].megabytes_per_second() : mine.link_next_mb_s;
    for (int r = 0; r < world; ++r) hosts[static_cast<size_t>(r)] = side->host_of(r);
  }
  constexpr int64_t kFields = 4;
  const Device device = group.collective_device();
  Tensor row = from_vector<double>({mine.link_next_mb_s, mine.link_prev_mb_s, mine.compute_ms, mine.comm_wait_ms});
  row = row.to(device);
  Tensor all = empty({world * kFields}, TensorOptions(kFloat64, device));
  group.allgather_base(all, row)->wait();
  all = all.to(kCPU);
  const double* v = all.data_ptr<double>();
  std::vector<RankHealth> ranks(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    ranks[r] = RankHealth{v[r * kFields], v[r * kFields + 1], v[r * kFields + 2], v[r * kFields + 3]};
  }
  return find_stragglers(iteration, std::move(ranks), std::move(hosts));
}

}  // namespace ember::distributed
