// Two metronome-scheduler replicas with --leader-elect against the fake API server: the first
// leads (plans, serves the shims, writes LinkSchedules), the second stands by (/healthz yes,
// /readyz 503, no shim endpoint); the leader is killed (SIGKILL) and the standby takes over
// within 10 s on the default lease settings and starts from the last plan: jobs that register
// again, in the other order, get the slots they had.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>

#include "../kube/fake_apiserver.hpp"
#include "harness.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/timetable.hpp"

namespace metronome::testing {
namespace {

using kube::testing::FakeApiServer;

int HttpStatus(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1, 0);
  auto r = c.Get(path.c_str());
  return r ? r->status : 0;
}

// Whether something accepts TCP connections on the loopback port.
bool Listening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

struct Job2 {
  std::unique_ptr<ProtoClient> r0, r1;
};

// A two-rank job on (n0, n1) across the default link; rank 0 reports a profile. Returns the
// timetable rank 0 was pushed.
Timetable Join(zmq::context_t& ctx, const Scheduler& s, const std::string& name,
               const std::string& n0, const std::string& n1, Job2& j) {
  j.r0 = std::make_unique<ProtoClient>(ctx, s.Endpoint());
  j.r1 = std::make_unique<ProtoClient>(ctx, s.Endpoint());
  EXPECT_TRUE(j.r0->Register(name, 0, 2, n0));
  EXPECT_TRUE(j.r1->Register(name, 1, 2, n1));
  j.r0->Send(j.r0->MakeReport(name, 0, 100 * kMs, 30 * kMs));
  EXPECT_TRUE(j.r0->Expect<proto::TimetablePush>(5000)) << name << " got no timetable";
  return j.r0->timetable.value_or(Timetable{});
}

// The LinkSchedule "default" as the leader wrote it: offset (ns) by job name.
std::map<std::string, int64_t> PublishedOffsets(const FakeApiServer& api) {
  std::map<std::string, int64_t> out;
  const auto ls = api.Object("linkschedules", "", "default");
  if (!ls || !ls->contains("status")) return out;
  for (const auto& j : (*ls)["status"].value("jobs", json::array())) {
    out[j.value("name", "")] = std::llround(j.value("offsetMs", 0.0) * 1e6);
  }
  return out;
}

TEST(Standby, TakesOverWithinTenSecondsAndKeepsTheJobsInTheirSlots) {
  FakeApiServer api;
  const std::string token = TempPath("standby-token");
  const std::string config = TempPath("standby.yaml");
  WriteFile(token, api.Token());
  WriteFile(config, "kubernetes:\n  enabled: true\n  verify_pods: false\n  api_server: " +
                        api.Url() + "\n  token_file: " + token + "\n");
  const std::vector<std::string> args = {"--config", config, "--leader-elect",
                                         "--offline-interval-ms", "0"};

  Scheduler a(args);
  ASSERT_TRUE(a.Ready()) << a.Log();
  ASSERT_TRUE(WaitFor([&] { return HttpStatus(a.HttpPort(), "/readyz") == 200; }, 10000))
      << a.Log();
  Scheduler b(args);
  ASSERT_TRUE(b.Ready()) << b.Log();
  const auto lease = api.Object("leases", "default", "metronome-scheduler");
  ASSERT_TRUE(lease.has_value());
  const std::string leader = (*lease)["spec"].value("holderIdentity", "");
  EXPECT_FALSE(leader.empty());

  // The standby: alive, not ready, no shim endpoint, not planning.
  EXPECT_EQ(b.Get("/healthz").value_or(json{})["role"], "standby");
  EXPECT_EQ(HttpStatus(b.HttpPort(), "/readyz"), 503);
  const int b_zmq = std::stoi(b.Endpoint().substr(b.Endpoint().rfind(':') + 1));
  EXPECT_FALSE(Listening(b_zmq));
  EXPECT_EQ(MetricValue(b.Metrics(), "metronome_leader"), 0);
  EXPECT_EQ(a.Get("/healthz").value_or(json{})["role"], "leader");

  // Two jobs across the one link plan with the leader and are published.
  zmq::context_t ctx;
  Job2 j1, j2;
  Join(ctx, a, "job-1", "n0", "n1", j1);
  Join(ctx, a, "job-2", "n2", "n3", j2);
  std::map<std::string, int64_t> before;
  ASSERT_TRUE(WaitFor(
      [&] {
        before = PublishedOffsets(api);
        return before.size() == 2;
      },
      10000));
  ASSERT_NE(before["job-1"], before["job-2"]);

  // The leader dies. Its shims go silent with it.
  const auto killed = std::chrono::steady_clock::now();
  a.Kill(SIGKILL);
  j1 = {};
  j2 = {};
  ASSERT_TRUE(WaitFor([&] { return HttpStatus(b.HttpPort(), "/readyz") == 200; }, 15000))
      << b.Log();
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("standby took over %.2f s after the leader was killed\n", took_s);
  EXPECT_LE(took_s, 10.0);
  EXPECT_NE((*api.Object("leases", "default", "metronome-scheduler"))["spec"]["holderIdentity"],
            leader);
  EXPECT_EQ(b.Get("/healthz").value_or(json{})["role"], "leader");
  EXPECT_EQ(MetricValue(b.Metrics(), "metronome_leader"), 1);

  // The jobs come back in the other order and get the slots they had.
  const Timetable t2 = Join(ctx, b, "job-2", "n2", "n3", j2);
  const Timetable t1 = Join(ctx, b, "job-1", "n0", "n1", j1);
  EXPECT_EQ(t2.offset_ns, before["job-2"]);
  EXPECT_EQ(t1.offset_ns, before["job-1"]);
  EXPECT_NE(b.Log().find("planned where the previous leader ran them"), std::string::npos);

  // A clean stop empties the Lease for the next replica.
  EXPECT_EQ(b.Stop(), 0) << b.Log();
  EXPECT_EQ((*api.Object("leases", "default", "metronome-scheduler"))["spec"]["holderIdentity"],
            "");
}

TEST(Standby, LeaderElectionWithoutAnApiServerIsAConfigurationError) {
  const auto [rc, out] = RunToEnd({METRONOME_SCHEDULER_BIN, "--leader-elect"}, "no-api");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--leader-elect"), std::string::npos) << out;
  const std::string config = TempPath("standby-bad.yaml");
  WriteFile(config, "kubernetes:\n  api_server: http://127.0.0.1:1\n");
  const auto [rc2, out2] =
      RunToEnd({METRONOME_SCHEDULER_BIN, "--config", config, "--leader-elect",
                "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "5s"},
               "bad-durations");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("renew deadline must be shorter"), std::string::npos) << out2;
  const auto [rc3, out3] = RunToEnd({METRONOME_SCHEDULER_BIN, "--config", config, "--leader-elect",
                                     "--leader-elect-retry-period", "soon"},
                                    "bad-duration");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("expected a duration"), std::string::npos) << out3;
}

}  // namespace
}  // namespace metronome::testing
