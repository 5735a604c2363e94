// find_stragglers (Note [Straggler check]) on measurements as ranks would report them: which rank
// is named, when no verdict is possible, and the wording of the logging data's summary.
// tests/scripts/cluster_test.sh slows a real host's link mid-run and checks the name it gets.
#include "distributed/ddp_reports/straggler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::distributed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// `world` ranks, `per_host` to a host (host k is "h<k>"), every link at `fast` MB/s, 100 ms compute.
struct Cluster {
  std::vector<RankHealth> ranks;
  std::vector<std::string> hosts;
  Cluster(int world, int per_host, double fast = 60.0) {
    for (int r = 0; r < world; ++r) {
      ranks.push_back(RankHealth{fast, fast, 100.0, 5.0});
      hosts.push_back("h" + std::to_string(r / per_host));
    }
  }
  // Every probe that crosses host `h`'s link runs at `rate`.
  void slow_host(int h, double rate) {
    const int world = static_cast<int>(ranks.size());
    const auto crosses = [&](int a, int b) {
      return hosts[a] != hosts[b] && (hosts[a] == "h" + std::to_string(h) || hosts[b] == "h" + std::to_string(h));
    };
    for (int r = 0; r < world; ++r) {
      if (crosses(r, (r + 1) % world)) ranks[r].link_next_mb_s = rate;
      if (crosses(r, (r - 1 + world) % world)) ranks[r].link_prev_mb_s = rate;
    }
  }
  StragglerReport check() const { return find_stragglers(40, ranks, hosts); }
};

TEST(Straggler, HealthyClusterNamesNobody) {
  const StragglerReport r = Cluster(4, 1).check();
  EXPECT_EQ(r.iteration, 40);
  EXPECT_FALSE(r.found());
  EXPECT_EQ(r.summary, "");
  EXPECT_DOUBLE_EQ(r.median_link_mb_s, 60.0);
  EXPECT_DOUBLE_EQ(r.median_compute_ms, 100.0);
  EXPECT_EQ(r.ranks.size(), 4u);
}

TEST(Straggler, TheRankBehindASlowLinkIsNamedNotItsNeighbours) {
  Cluster c(4, 1);
  c.slow_host(2, 6.0);
  const StragglerReport r = c.check();
  EXPECT_THAT(r.slow_link_ranks, ElementsAre(2));
  EXPECT_THAT(r.slow_compute_ranks, IsEmpty());
  EXPECT_EQ(r.summary,
            "rank 2 (host h2): its links run at 6.0 MB/s at most, 10.0x slower than the links between the "
            "other ranks (median 60.0 MB/s) -- a slow or congested network link");
}

TEST(Straggler, EveryRankOfASlowHostIsNamedAndItsLoopbackProbesIgnored) {
  Cluster c(8, 2);  // ranks 4 and 5 on h2 probe each other over loopback: fast, and no evidence
  c.ranks[4].link_next_mb_s = c.ranks[5].link_prev_mb_s = 5000.0;
  c.slow_host(2, 5.0);
  const StragglerReport r = c.check();
  EXPECT_THAT(r.slow_link_ranks, ElementsAre(4, 5))
      << "ranks 3 and 6 reach other hosts only through h2, but h1 and h3 have fast links elsewhere";
  EXPECT_EQ(r.summary,
            "host h2 (ranks 4, 5): its links run at 5.0 MB/s at most, 12.0x slower than the links between "
            "the other hosts (median 60.0 MB/s) -- a slow or congested network link");
}

TEST(Straggler, TwoHostsCannotTellWhichEndIsSlow) {
  Cluster c(2, 1);
  c.slow_host(1, 1.0);
  EXPECT_FALSE(c.check().found()) << "a single link: either end may be the slow one";
  Cluster one_host(3, 3);
  EXPECT_DOUBLE_EQ(one_host.check().median_link_mb_s, 0.0) << "no probe crossed a network";
  EXPECT_FALSE(one_host.check().found());
}

TEST(Straggler, ASlightlySlowerLinkIsNoStraggler) {
  Cluster c(4, 1);
  c.slow_host(1, 25.0);  // 2.4x: within the 3x threshold
  EXPECT_FALSE(c.check().found());
}

TEST(Straggler, FailedProbesNameTheRank) {
  Cluster c(3, 1);
  c.slow_host(0, 0.0);
  const StragglerReport r = c.check();
  EXPECT_THAT(r.slow_link_ranks, ElementsAre(0));
  EXPECT_THAT(r.summary, HasSubstr("rank 0 (host h0): its link probes failed, against the links between "
                                   "the other ranks (median 60.0 MB/s)"));
}

TEST(Straggler, ARankThatComputesFarLongerIsNamed) {
  Cluster c(4, 1);
  c.ranks[3].compute_ms = 250.0;
  c.ranks[1].compute_ms = 150.0;  // 1.5x: not named
  const StragglerReport r = c.check();
  EXPECT_THAT(r.slow_compute_ranks, ElementsAre(3));
  EXPECT_THAT(r.slow_link_ranks, IsEmpty());
  EXPECT_EQ(r.summary, "rank 3 (host h3): computes for 250.0 ms per iteration, 2.5x the others' median "
                       "(100.0 ms) -- an overloaded or slower machine");
}

TEST(Straggler, ThresholdsAreOptions) {
  Cluster c(4, 1);
  c.slow_host(1, 25.0);
  EXPECT_THAT(find_stragglers(1, c.ranks, c.hosts, StragglerThresholds{2.0, 2.0}).slow_link_ranks, ElementsAre(1));
}

}  // namespace
}  // namespace ember::distributed
