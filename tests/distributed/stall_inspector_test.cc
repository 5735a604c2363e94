// The stall inspector's side channel without MPI: responders in one process answer each other's
// queries, a peer that never answers costs no more than the budget, a closed port is reported, and
// summarize_stall words the timeout message as the watchdog prints it.
#include "distributed/diagnostics/stall_inspector.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::distributed {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using State = CollectiveProgress::State;

// A socket on 127.0.0.1 that listens but never accepts: the kernel completes the connection, as it
// does for a SIGSTOPped process, and nothing ever answers. Closed by the destructor.
struct SilentPeer {
  SilentPeer() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd, 4), 0);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    endpoint.address = "127.0.0.1";
    endpoint.port = ntohs(addr.sin_port);
    endpoint.pid = 4242;
    endpoint.host = "frozen-host";
  }
  ~SilentPeer() { close(fd); }
  int fd = -1;
  SideChannelEndpoint endpoint;
};

TEST(StallInspector, EndpointSurvivesTheWire) {
  SideChannelEndpoint e{"10.1.2.3", 40123, 777, "node-7"};
  const std::string wire = e.to_wire();
  ASSERT_EQ(wire.size(), SideChannelEndpoint::kWireSize);
  const SideChannelEndpoint back = SideChannelEndpoint::from_wire(wire.data());
  EXPECT_EQ(back.address, "10.1.2.3");
  EXPECT_EQ(back.port, 40123);
  EXPECT_EQ(back.pid, 777);
  EXPECT_EQ(back.host, "node-7");
}

TEST(StallInspector, RespondersAnswerEachOther) {
  StallInspector a(0), b(1);
  ASSERT_NE(a.endpoint().port, 0);
  ASSERT_NE(b.endpoint().port, 0);
  a.set_peers({a.endpoint(), b.endpoint()});
  b.set_peers({a.endpoint(), b.endpoint()});
  b.entered(3, "allreduce #3 (SUM, float32 [4], 1 tensor)");
  b.finished(3, true);

  std::vector<PeerAnswer> answers = a.query_peers();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].rank, 1);
  ASSERT_TRUE(answers[0].answered) << answers[0].failure;
  EXPECT_EQ(answers[0].progress.state, State::kCompleted);
  EXPECT_EQ(answers[0].progress.sequence_number, 3u);
  EXPECT_EQ(answers[0].progress.description, "allreduce #3 (SUM, float32 [4], 1 tensor)");

  // a has entered nothing yet, and says so.
  answers = b.query_peers();
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].answered) << answers[0].failure;
  EXPECT_EQ(answers[0].progress.state, State::kNone);
}

// Note [Side channel link probes]: a probe's bytes arrive and are acknowledged; the rate is measured.
TEST(StallInspector, LinkProbesAreAcknowledgedAndTimed) {
  StallInspector a(0), b(1);
  a.set_peers({a.endpoint(), b.endpoint()});
  b.set_peers({a.endpoint(), b.endpoint()});
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{3} << 20}) {
    const std::vector<LinkMeasurement> m = a.probe_links({1}, bytes, std::chrono::seconds(10));
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].peer, 1);
    EXPECT_EQ(m[0].peer_host, b.endpoint().host);
    ASSERT_TRUE(m[0].ok) << m[0].failure;
    EXPECT_GT(m[0].seconds, 0.0);
    if (bytes > 0) {
      EXPECT_GT(m[0].megabytes_per_second(), 0.0);
    }
  }
  EXPECT_EQ(a.host_of(1), b.endpoint().host);
  EXPECT_EQ(a.host_of(2), "");
}

// A probe that stalls halfway (its sender stopped) does not delay a progress query: the responder
// serves every client at once.
TEST(StallInspector, AStalledProbeDoesNotDelayQueries) {
  StallInspector a(0), b(1);
  a.set_peers({a.endpoint(), b.endpoint()});
  b.entered(7, "barrier #7");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(b.endpoint().port));
  inet_pton(AF_INET, b.endpoint().address.c_str(), &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string half = std::string(StallInspector::kProbeHeader) + "1000000\n" + std::string(1000, 'x');
  ASSERT_EQ(send(fd, half.data(), half.size(), 0), static_cast<ssize_t>(half.size()));
  const auto start = Clock::now();
  const std::vector<PeerAnswer> answers = a.query_peers(std::chrono::milliseconds(1500));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].answered) << answers[0].failure;
  EXPECT_EQ(answers[0].progress.sequence_number, 7u);
  EXPECT_LT(ms, 1000.0) << "the query waited for the stalled probe";
  close(fd);
}

TEST(StallInspector, ProbesOfMissingPeersFailWithinTheBudget) {
  StallInspector a(0);
  SilentPeer silent;
  SideChannelEndpoint none{"127.0.0.1", 0, 1, "nowhere"};
  a.set_peers({a.endpoint(), silent.endpoint, none});
  const auto start = Clock::now();
  const std::vector<LinkMeasurement> m = a.probe_links({1, 2}, 1 << 20, std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_FALSE(m[0].ok);
  EXPECT_EQ(m[0].megabytes_per_second(), 0.0);
  EXPECT_FALSE(m[1].ok);
  EXPECT_EQ(m[1].failure, "it has no side channel");
  EXPECT_THROW(a.probe_links({0}, 1, std::chrono::seconds(1)), std::exception) << "not itself";
}

TEST(StallInspector, LaterProgressIsNotOverwrittenByAnEarlierFinish) {
  StallInspector a(0);
  a.entered(4, "allreduce #4 ()");
  a.entered(5, "broadcast #5 ()");  // an inline collective issued from #4's callback
  a.finished(4, true);
  EXPECT_EQ(a.progress().sequence_number, 5u);
  EXPECT_EQ(a.progress().state, State::kRunning);
}

TEST(StallInspector, SilentAndClosedPeersCostAtMostTheBudget) {
  StallInspector a(0);
  SilentPeer silent;
  SideChannelEndpoint closed;
  {
    SilentPeer gone;  // its port is closed again at the end of this scope
    closed = gone.endpoint;
  }
  SideChannelEndpoint none{"127.0.0.1", 0, 9, "nowhere"};
  a.set_peers({a.endpoint(), silent.endpoint, closed, none});
  const auto start = Clock::now();
  const std::vector<PeerAnswer> answers = a.query_peers(std::chrono::milliseconds(300));
  const auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(2));
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_FALSE(answers[0].answered);
  EXPECT_EQ(answers[0].failure, "no answer within 300 ms");
  EXPECT_FALSE(answers[1].answered);
  EXPECT_TRUE(answers[1].refused);
  EXPECT_EQ(answers[1].failure, "connection refused");
  EXPECT_FALSE(answers[2].answered);
  EXPECT_EQ(answers[2].failure, "it has no side channel");
}

TEST(StallInspector, AnswersAreOneLineAndParsedBack) {
  int rank = -1;
  CollectiveProgress p;
  ASSERT_TRUE(StallInspector::parse_answer("2 running 41 barrier #41 ()", &rank, &p));
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(p.state, State::kRunning);
  EXPECT_EQ(p.sequence_number, 41u);
  EXPECT_EQ(p.description, "barrier #41 ()");
  EXPECT_FALSE(StallInspector::parse_answer("hello", &rank, &p));
  EXPECT_FALSE(StallInspector::parse_answer("2 sleeping 41 x", &rank, &p));
}

PeerAnswer answered(int rank, State state, uint64_t seq, std::string description) {
  PeerAnswer a;
  a.rank = rank;
  a.answered = true;
  a.progress.state = state;
  a.progress.sequence_number = seq;
  a.progress.description = std::move(description);
  return a;
}

TEST(StallInspector, SummaryNamesWhoDidNotArriveAndWhy) {
  PeerAnswer silent;
  silent.rank = 1;
  silent.endpoint = {"10.0.0.2", 5000, 4242, "node-2"};
  silent.failure = "no answer within 2000 ms";
  const std::string ours = "allreduce #42 (SUM, float32 [1234], 1 tensor)";
  const StallReport r = summarize_stall(
      42, ours,
      {silent, answered(2, State::kRunning, 42, "allreduce #42 (SUM, float32 [1234], 1 tensor)"),
       answered(3, State::kRunning, 41, "barrier #41 ()"), answered(4, State::kNone, 0, ""),
       answered(5, State::kRunning, 42, "broadcast #42 (root 0, float32 [3], 1 tensor)"),
       answered(6, State::kCompleted, 41, "allreduce #41 (SUM, float32 [1234], 1 tensor)")});
  EXPECT_EQ(r.not_arrived, (std::vector<int>{1, 3, 4, 5, 6}));
  EXPECT_EQ(r.arrived, (std::vector<int>{2}));
  EXPECT_EQ(r.summary,
            "ranks 1, 3, 4, 5, 6 did not arrive (rank 1 did not respond, no answer within 2000 ms: pid "
            "4242 on node-2 is stopped, hung in native code, or dead; rank 3 has not arrived: its "
            "last collective is barrier #41 (), still running; rank 4 has not arrived: it has entered no "
            "collective on this group yet; rank 5 called a different collective: broadcast #42 (root 0, "
            "float32 [3], 1 tensor); rank 6 has not arrived: its last collective is allreduce #41 (SUM, "
            "float32 [1234], 1 tensor), finished); rank 2 arrived");
}

TEST(StallInspector, SummarySaysARefusingRankIsGone) {
  PeerAnswer gone;
  gone.rank = 2;
  gone.endpoint = {"10.0.0.3", 5000, 99, "node-3"};
  gone.failure = "connection refused";
  gone.refused = true;
  const StallReport r = summarize_stall(3, "allreduce #3 ()", {gone});
  EXPECT_EQ(r.not_arrived, (std::vector<int>{2}));
  EXPECT_EQ(r.gone, (std::vector<int>{2}));
  EXPECT_EQ(r.summary,
            "rank 2 did not arrive (rank 2 is gone, connection refused: pid 99 on node-3 has exited, or "
            "destroyed this group)");
}

TEST(StallInspector, SummarySaysAnUnreachableRanksNetworkMayBeDown) {
  PeerAnswer lost;
  lost.rank = 1;
  lost.endpoint = {"10.77.0.2", 5000, 42, "h1"};
  lost.failure = "no connection within 2000 ms";
  lost.unreachable = true;
  const StallReport r = summarize_stall(3, "allreduce #3 ()", {lost});
  EXPECT_EQ(r.not_arrived, (std::vector<int>{1}));
  EXPECT_EQ(r.summary,
            "rank 1 did not arrive (rank 1 is unreachable, no connection within 2000 ms: its host h1 "
            "(10.77.0.2) cannot be reached from here -- the network link to it may be down, or the host "
            "is gone)");
}

TEST(StallInspector, SummaryWhenEveryRankArrived) {
  const StallReport r = summarize_stall(
      7, "barrier #7 ()",
      {answered(0, State::kFailed, 7, "barrier #7 ()"), answered(2, State::kRunning, 8, "allreduce #8 ()")});
  EXPECT_TRUE(r.not_arrived.empty());
  EXPECT_EQ(r.summary, "every other rank arrived (ranks 0, 2): the transfer itself did not complete");
}

}  // namespace
}  // namespace ember::distributed
