// metronome-scheduler and several protocol clients on loopback: registration, clock sync
// against skewed clients, timetable pushes that are respected, re-planning on join and leave,
// the controller's lateness rule, a refused overrun widening, rank timeouts, restart with
// re-registration, CURVE, and bad input at the ZeroMQ endpoint.
#include <gtest/gtest.h>

#include <msgpack.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "harness.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/clock_sync.hpp"
#include "metronome/common/timetable.hpp"

namespace metronome::testing {
namespace {

// Two gated timetables never have windows open at the same instant (sampled every 50 µs over
// several hyperperiods).
bool Disjoint(const Timetable& a, const Timetable& b) {
  const int64_t span = 4 * std::max(a.period_ns, b.period_ns);
  const int64_t t0 = RealtimeNs();
  for (int64_t t = t0; t < t0 + span; t += 50'000) {
    if (InWindow(a, t) && InWindow(b, t)) return false;
  }
  return true;
}

struct Job2 {
  std::string name;
  std::unique_ptr<ProtoClient> r0, r1;
};

Job2 RegisterJob(zmq::context_t& ctx, const Scheduler& s, const std::string& name,
                 const std::string& n0, const std::string& n1, int32_t priority = 1,
                 uint32_t features = 0) {
  Job2 j{name, std::make_unique<ProtoClient>(ctx, s.Endpoint()),
         std::make_unique<ProtoClient>(ctx, s.Endpoint())};
  EXPECT_TRUE(j.r0->Register(name, 0, 2, n0, priority, features)) << name;
  EXPECT_TRUE(j.r1->Register(name, 1, 2, n1, priority, features)) << name;
  return j;
}

// Two racks whose uplinks (200 Mbit/s unless given) every two-rack job crosses, nodes with
// 1 Gbit/s NICs unless given; the controller acts on one report (`extra` adds controller
// settings).
std::string TwoRackConfig(const std::string& name, const std::string& extra = "",
                          const std::string& uplink_gbps = "0.2",
                          const std::string& nic_gbps = "1") {
  const auto rack = [&](const std::string& r, const std::string& a, const std::string& b) {
    return "    - name: " + r + "\n      uplink_gbps: " + uplink_gbps +
           "\n      nodes: [{name: " + a + ", nic_gbps: " + nic_gbps + "}, {name: " + b +
           ", nic_gbps: " + nic_gbps + "}]\n";
  };
  std::string config = TempPath(name);
  WriteFile(config, "topology:\n  racks:\n" + rack("r1", "h1", "h2") + rack("r2", "h3", "h4") +
                        "controller:\n  profile_change_reports: 1\n  late_reports: 1000\n" + extra);
  return config;
}

// Rank 0 of a job with 500 ms iterations whose bytes take `wire_ms` on those uplinks reports
// phases of `phase_ms` (its compute unchanged) starting at `starts`.
void ReportPhases(Job2& j, int64_t wire_ms, int64_t phase_ms, std::vector<int64_t> starts,
                  int64_t cycle_ms = 500) {
  proto::ProfileReport r = j.r0->MakeReport(j.name, 0, (cycle_ms - wire_ms + phase_ms) * kMs,
                                            phase_ms * kMs, std::move(starts));
  r.bytes_per_phase = static_cast<uint64_t>(static_cast<double>(wire_ms) / 1e3 / 1.1 * 25e6);
  r.compute_ns = (cycle_ms - wire_ms) * kMs;
  r.jitter_ns = 5 * kMs;
  j.r0->Send(r);
}

// Rank 0 reports a profile; both ranks must receive a timetable.
void ReportProfile(Job2& j, int64_t period, int64_t comm) {
  j.r0->Send(j.r0->MakeReport(j.name, 0, period, comm));
  ASSERT_TRUE(j.r0->Expect<proto::TimetablePush>()) << j.name << " rank 0 got no timetable";
  ASSERT_TRUE(j.r1->Expect<proto::TimetablePush>()) << j.name << " rank 1 got no timetable";
}

// Both jobs report (300 ms every 100 ms, 170 ms every 60 ms) until the higher one is gated and
// the lower one has its window to yield to.
void PlanHighAndLower(Scheduler& s, Job2& hi, Job2& lo) {
  ReportProfile(hi, 300 * kMs, 100 * kMs);
  ReportProfile(lo, 170 * kMs, 60 * kMs);
  ASSERT_TRUE(WaitFor([&] {
    lo.r0->Poll(50);
    hi.r0->Poll(1);
    return lo.r0->yields.count > 0 && hi.r0->timetable && !AlwaysOpen(*hi.r0->timetable);
  })) << s.Log();
}

TEST(SchedulerEndpoint, RegistersClientsAndListsThem) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1");
  auto b = RegisterJob(ctx, s, "job-b", "n2", "n3", 2);
  auto jobs = s.Get("/api/v1/jobs");
  ASSERT_TRUE(jobs);
  ASSERT_EQ((*jobs)["jobs"].size(), 2u);
  EXPECT_EQ((*jobs)["jobs"][0]["job"], "job-a");
  EXPECT_EQ((*jobs)["jobs"][0]["ranks"], 2);
  EXPECT_EQ((*jobs)["jobs"][1]["priority"], 2);
  auto detail = s.Get("/api/v1/jobs/job-b");
  ASSERT_TRUE(detail);
  EXPECT_EQ((*detail)["rank_list"][1]["node"], "n3");
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_registrations_total{kind=\"new\"}"), 4);
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_ranks"), 4);
}

// One peer cannot grow the registry at will: past registry.max_ranks_per_client (1024) its
// hellos for new ranks are refused (`capacity`), and the ranks it has stay registered.
TEST(SchedulerEndpoint, OnePeerSpeaksForABoundedNumberOfRanks) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  ProtoClient peer(ctx, s.Endpoint());
  for (uint32_t r = 0; r < 1024; ++r) {
    ASSERT_TRUE(peer.Register("many-" + std::to_string(r), 0, 1, "n0")) << r;
  }
  peer.Send(peer.MakeHello("one-more", 0, 1, "n0"));
  const auto e = peer.Expect<proto::Error>();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message.rfind("capacity", 0), 0u) << e->message;
  EXPECT_TRUE(peer.Register("many-7", 0, 1, "n0")) << "a rank it has says hello again";
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_ranks"), 1024);
}

// A job's priority is the highest of its ranks': when the rank that raised it leaves, it comes
// down again (it stayed raised, outranking its neighbours, until the whole job left).
TEST(SchedulerEndpoint, AJobsPriorityFollowsTheRanksItHas) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  ProtoClient r0(ctx, s.Endpoint());
  ProtoClient r1(ctx, s.Endpoint());
  ASSERT_TRUE(r0.Register("mixed", 0, 2, "n0", 1));
  ASSERT_TRUE(r1.Register("mixed", 1, 2, "n1", 2));
  auto job = s.Get("/api/v1/jobs/mixed");
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["priority"], 2);
  r1.Send(proto::Bye{"mixed", 1, "test"});
  ASSERT_TRUE(WaitFor(
      [&] {
        job = s.Get("/api/v1/jobs/mixed");
        return job && (*job)["priority"] == 1;
      },
      2000))
      << (job ? job->dump() : "no job");
}

TEST(SchedulerEndpoint, ClockOffsetFoundWithinInjectedSkew) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  for (const int64_t skew : {int64_t{250} * kMs, int64_t{-80} * kMs, int64_t{3'600'000} * kMs}) {
    ProtoClient c(ctx, s.Endpoint(), skew);
    ClockSync sync;
    for (uint64_t seq = 1; seq <= 12; ++seq) {
      proto::ClockPing ping{seq, c.Now()};
      c.Send(ping);
      auto pong = c.Expect<proto::ClockPong>();
      ASSERT_TRUE(pong);
      const int64_t t4 = c.Now();
      EXPECT_EQ(pong->seq, seq);
      EXPECT_EQ(pong->t1_ns, ping.t1_ns);
      EXPECT_LE(pong->t2_ns, pong->t3_ns);
      EXPECT_TRUE(sync.AddSample({ping.t1_ns, pong->t2_ns, pong->t3_ns, t4}));
    }
    ASSERT_TRUE(sync.HasEstimate());
    // The true offset (server − client) is −skew; the estimate is within its error bound.
    EXPECT_LE(std::llabs(sync.OffsetNs() + skew), sync.ErrorBoundNs())
        << "skew " << skew << " estimate " << sync.OffsetNs();
    EXPECT_LT(sync.ErrorBoundNs(), 20 * kMs);
  }
}

TEST(SchedulerEndpoint, TimetablesArePushedRespectedAndJudged) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1", 2);
  auto b = RegisterJob(ctx, s, "job-b", "n2", "n3", 1);
  ReportProfile(a, 100 * kMs, 30 * kMs);
  ReportProfile(b, 100 * kMs, 30 * kMs);
  a.r0->Poll(100);
  b.r0->Poll(100);
  ASSERT_TRUE(a.r0->timetable && b.r0->timetable);
  const Timetable ta = *a.r0->timetable, tb = *b.r0->timetable;
  EXPECT_EQ(ta.window_ns, 30 * kMs);
  EXPECT_GT(ta.late_slack_ns, 0);
  EXPECT_GT(ta.max_wait_ns, 0);
  EXPECT_TRUE(Disjoint(ta, tb)) << "windows of two gated jobs on one link overlap";
  auto tt = s.Get("/api/v1/jobs/job-a/timetable");
  ASSERT_TRUE(tt);
  EXPECT_EQ((*tt)["offset_ns"], ta.offset_ns);
  EXPECT_EQ((*tt)["version"], ta.version);

  // Job A runs on its windows (as a gated shim would); job B runs half a period off them.
  for (int i = 0; i < 8; ++i) {
    const int64_t now = RealtimeNs();
    std::vector<int64_t> on, off;
    for (int k = 3; k >= 0; --k) {
      on.push_back(WindowOpenAtOrBefore(ta, now) - k * ta.period_ns + 200'000);
      off.push_back(WindowOpenAtOrBefore(tb, now) - k * tb.period_ns + tb.period_ns / 2);
    }
    a.r0->Send(a.r0->MakeReport("job-a", 0, 100 * kMs, 30 * kMs, on));
    b.r0->Send(b.r0->MakeReport("job-b", 0, 100 * kMs, 30 * kMs, off));
    std::this_thread::sleep_for(std::chrono::milliseconds(110));
  }
  ASSERT_TRUE(WaitFor([&] {
    auto j = s.Get("/api/v1/jobs/job-b");
    return j && (*j)["replans"].get<int>() >= 1;
  }));
  auto ja = s.Get("/api/v1/jobs/job-a");
  auto jb = s.Get("/api/v1/jobs/job-b");
  ASSERT_TRUE(ja && jb);
  EXPECT_GE((*ja)["phases_seen"].get<int>(), 8);
  EXPECT_EQ((*ja)["phases_late"], 0) << "on-window phases judged late";
  EXPECT_LT(std::llabs((*ja)["lateness_ewma_ns"].get<int64_t>()), 1 * kMs);
  EXPECT_GE((*jb)["phases_late"].get<int>(), 5);
  const std::string m = s.Metrics();
  EXPECT_GE(MetricValue(m, "metronome_controller_decisions_total{decision=\"replan_lateness\"}"),
            1);
  EXPECT_GE(MetricValue(m, "metronome_controller_decisions_total{decision=\"hold\"}"), 1);
  EXPECT_GE(MetricValue(m, "metronome_replans_total{reason=\"lateness\"}"), 1);
  auto phases = s.Get("/api/v1/jobs/job-a/phases?limit=5");
  ASSERT_TRUE(phases);
  EXPECT_EQ((*phases)["phases"].size(), 5u);
  EXPECT_NE(s.Log().find("decision=replan_lateness"), std::string::npos);
}

TEST(SchedulerEndpoint, ChangedProfileTriggersReplan) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1");
  ReportProfile(a, 100 * kMs, 30 * kMs);
  const uint64_t v1 = a.r0->timetable->version;
  for (int i = 0; i < 3; ++i) a.r0->Send(a.r0->MakeReport("job-a", 0, 200 * kMs, 50 * kMs));
  auto push = a.r0->Expect<proto::TimetablePush>();
  ASSERT_TRUE(push);
  EXPECT_GT(push->timetable.version, v1);
  EXPECT_GE(push->timetable.period_ns, 200 * kMs);
  // Alone on its link, the job is planned ungated: its window is its whole (new) period.
  EXPECT_EQ(push->timetable.window_ns, push->timetable.period_ns);
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_replans_total{reason=\"profile\"}"), 1);
}

// Two jobs on one link, of high and low priority: the low one is pushed the high one's gated
// window to yield to (in the same epoch as its own timetable), and the status API shows it;
// the high one yields to nothing.
TEST(SchedulerEndpoint, ALowerPriorityJobIsPushedTheHigherJobsWindowToYieldTo) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto hi = RegisterJob(ctx, s, "hi", "n0", "n1", 2);
  auto lo = RegisterJob(ctx, s, "lo", "n2", "n3", 0);
  PlanHighAndLower(s, hi, lo);
  const Timetable& high = *hi.r0->timetable;
  const YieldSet& y = lo.r0->yields;
  ASSERT_EQ(y.count, 1u);
  EXPECT_EQ(y.windows[0].period_ns, high.period_ns);
  EXPECT_EQ(y.windows[0].offset_ns, high.offset_ns);
  EXPECT_GE(y.windows[0].window_ns, high.window_ns);  // its window and its jitter's guard
  EXPECT_EQ(y.epoch_ns, lo.r0->timetable->epoch_ns);
  EXPECT_EQ(hi.r0->yields.count, 0u);
  const auto tt = s.Get("/api/v1/jobs/lo/timetable");
  ASSERT_TRUE(tt);
  EXPECT_EQ((*tt)["yields"]["windows"].size(), 1u) << tt->dump();
}

// A job that has registered but not reported a profile yet (its shims are still learning its
// rhythm) is not planned; on a link where a higher-priority job is gated it is pushed a
// timetable that holds nothing and that job's window to yield to (decision 0016), then its
// plan once it reports.
TEST(SchedulerEndpoint, AJobNotPlannedYetYieldsToTheGatedHigherWindowsOnItsLinks) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto hi = RegisterJob(ctx, s, "hi", "n0", "n1", 2);
  auto mid = RegisterJob(ctx, s, "mid", "n2", "n3", 1);
  PlanHighAndLower(s, hi, mid);
  const Timetable high = *hi.r0->timetable;
  auto lo = RegisterJob(ctx, s, "lo", "n4", "n5", 0);
  ASSERT_TRUE(WaitFor([&] {
    lo.r0->Poll(50);
    return lo.r0->yields.count > 0;
  })) << s.Log();
  ASSERT_TRUE(lo.r0->timetable);
  EXPECT_TRUE(AlwaysOpen(*lo.r0->timetable)) << "a job not planned is never held";
  const YieldSet& y = lo.r0->yields;
  // The high job's window first (the highest-ranked), exactly as planned: a job whose phase is
  // not measured has no need, tolerance or guard.
  ASSERT_GE(y.count, 1u);
  EXPECT_EQ(y.windows[0].period_ns, high.period_ns);
  EXPECT_EQ(y.windows[0].window_ns, high.window_ns);
  EXPECT_EQ(FloorMod(y.epoch_ns + y.windows[0].offset_ns - high.epoch_ns, high.period_ns),
            high.offset_ns);
  EXPECT_EQ(y.need_ns, 0);
  EXPECT_EQ(y.tolerance_ns, 0);
  auto job = s.Get("/api/v1/jobs/lo");
  ASSERT_TRUE(job);
  EXPECT_FALSE((*job)["planned"].get<bool>());
  EXPECT_GE((*job)["timetable"]["yields"]["windows"].size(), 1u) << job->dump();
  // Planned once it reports: a new version, its own slot.
  const uint64_t observed = lo.r0->timetable->version;
  ReportProfile(lo, 200 * kMs, 40 * kMs);
  EXPECT_GT(lo.r0->timetable->version, observed);
  EXPECT_GE(MetricValue(s.Metrics(), "metronome_timetable_pushes_total{reason=\"observe\"}"), 1);
}

// The low job's phases overrun its window while the high job on the same uplink runs past its own
// window and cushion: the widening waits for it (counted, logged, named in the status API) and
// is asked for once the high job keeps to its window again.
TEST(SchedulerEndpoint, AnOverrunWideningWaitsWhileAHigherJobSpills) {
  Scheduler s({"--config", TwoRackConfig("overrun-deferred.yaml", "  offline_interval_ms: 0\n")});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto hi = RegisterJob(ctx, s, "hi", "h1", "h3", 3);
  auto lo = RegisterJob(ctx, s, "lo", "h2", "h4", 1);
  ReportPhases(hi, 150, 150, {});
  ASSERT_TRUE(hi.r0->Expect<proto::TimetablePush>());
  ReportPhases(lo, 60, 60, {});
  ASSERT_TRUE(WaitFor([&] {
    lo.r0->Poll(50);
    hi.r0->Poll(1);
    return lo.r0->timetable && lo.r0->timetable->window_ns < lo.r0->timetable->period_ns &&
           hi.r0->timetable && hi.r0->timetable->window_ns < hi.r0->timetable->period_ns;
  })) << s.Log();
  const Timetable tt = *lo.r0->timetable;
  std::vector<int64_t> on;  // 20 phases on its windows: settled under this timetable
  for (int k = 20; k >= 1; --k) {
    on.push_back(WindowOpenAtOrBefore(tt, RealtimeNs()) - k * tt.period_ns);
  }
  const Timetable high = *hi.r0->timetable;
  const int64_t spilling_ms = (high.window_ns + high.late_slack_ns) / kMs + 20;
  ReportPhases(hi, 150, spilling_ms, {});
  const std::string deferred =
      "metronome_controller_decisions_total{decision=\"overrun_deferred\"}";
  const std::string widened = "metronome_controller_decisions_total{decision=\"replan_overrun\"}";
  ReportPhases(lo, 60, 80, on);
  ASSERT_TRUE(WaitFor([&] { return MetricValue(s.Metrics(), deferred) >= 1; })) << s.Log();
  EXPECT_LE(MetricValue(s.Metrics(), widened), 0) << s.Log();  // -1: never counted
  auto job = s.Get("/api/v1/jobs/lo");
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["profile"]["overrun_deferred_to"], "hi");
  EXPECT_EQ((*job)["profile"]["phase_floor_ns"].get<int64_t>(), 0);
  EXPECT_NE(s.Log().find("decision=overrun_deferred"), std::string::npos);

  ReportPhases(hi, 150, 150, {});                        // back inside its window
  on.push_back(WindowOpenAtOrBefore(tt, RealtimeNs()));  // judged on the report of a new phase
  ReportPhases(lo, 60, 80, on);
  ASSERT_TRUE(WaitFor([&] { return MetricValue(s.Metrics(), widened) >= 1; })) << s.Log();
  job = s.Get("/api/v1/jobs/lo");
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["profile"]["overrun_deferred_to"], "");
}

// The overrun rule end to end. Two jobs on 25 MB/s rack uplinks, 240 and 200 ms on the wire
// every 500 ms, take turns at 505 ms. The low-priority job's phases then take 230 ms on its
// windows: the controller asks for a 230 ms window, which would fit beside the other's only at
// twice the period; the planning thread refuses it. Counted, logged, no new timetable, and the
// status API shows the refused window.
TEST(SchedulerEndpoint, AnOverrunWideningThatWouldDoubleThePeriodIsRefused) {
  Scheduler s({"--config", TwoRackConfig("overrun-refused.yaml")});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto hi = RegisterJob(ctx, s, "hi", "h1", "h3", 3);
  auto lo = RegisterJob(ctx, s, "lo", "h2", "h4", 1);
  ReportPhases(hi, 240, 240, {});
  ASSERT_TRUE(hi.r0->Expect<proto::TimetablePush>());
  ReportPhases(lo, 200, 200, {});
  ASSERT_TRUE(WaitFor([&] {
    lo.r0->Poll(50);
    return lo.r0->timetable && lo.r0->timetable->window_ns < lo.r0->timetable->period_ns;
  })) << s.Log();
  const std::string refused = "metronome_controller_decisions_total{decision=\"overrun_refused\"}";
  bool seen = false;
  for (int attempt = 0; attempt < 5 && !seen; ++attempt) {
    lo.r0->Poll(200);  // the latest timetable (the offline search may have moved it)
    const Timetable tt = *lo.r0->timetable;
    std::vector<int64_t> on;  // 20 phases on its windows: settled under this timetable
    for (int k = 20; k >= 1; --k) {
      on.push_back(WindowOpenAtOrBefore(tt, RealtimeNs()) - k * tt.period_ns);
    }
    ReportPhases(lo, 200, 230, on);
    seen = WaitFor([&] { return MetricValue(s.Metrics(), refused) >= 1; }, 2000);
  }
  ASSERT_TRUE(seen) << s.Log();
  EXPECT_GE(
      MetricValue(s.Metrics(), "metronome_controller_decisions_total{decision=\"replan_overrun\"}"),
      1);
  const uint64_t version = lo.r0->timetable->version;
  lo.r0->Poll(300);
  EXPECT_EQ(lo.r0->timetable->version, version) << "a refused widening pushed a timetable";
  EXPECT_LT(lo.r0->timetable->period_ns, 600 * kMs);
  auto job = s.Get("/api/v1/jobs/lo");
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["profile"]["overrun_refused_ns"].get<int64_t>(), 230 * kMs);
  EXPECT_EQ((*job)["profile"]["phase_floor_ns"].get<int64_t>(), 0);
  EXPECT_NE(s.Log().find("decision=overrun_refused"), std::string::npos);
}

// Two jobs of equal priority, a and b, registered across the two racks' uplinks, which only they
// cross (no stretching); b's shims take turns, a's as `a_features` says.
struct UplinkPair {
  explicit UplinkPair(const std::string& config, uint32_t a_features = proto::kFeatureTurns)
      : s({"--config", TwoRackConfig(config, "planning:\n  max_stretch: 1.0\n")}) {
    if (!s.Ready()) return;
    a = RegisterJob(ctx, s, "a", "h1", "h3", 1, a_features);
    b = RegisterJob(ctx, s, "b", "h2", "h4", 1, proto::kFeatureTurns);
  }
  Scheduler s;
  zmq::context_t ctx;
  Job2 a;
  Job2 b;
};

// Two jobs of equal priority on the two racks' uplinks, which only they cross and each fills
// (controller.turns by default), together on the wire for longer than their period (no stretching:
// one of them runs best-effort, and no timetable keeps them apart): each is pushed the other as its
// partner and asked for its phase edges; an edge of one's rank 0 reaches both ranks of the other at
// once, the edges of its rank 1 speak for no one (rank 0 does), and everything is counted. With
// turns off (controller.turns: false), a welcome announces none and an edge is refused and counted.
TEST(SchedulerEndpoint, TheTwoJobsOfALinkArePushedEachOtherAndTheirEdgesRelayed) {
  UplinkPair p("turns.yaml");
  ASSERT_TRUE(p.s.Ready()) << p.s.Log();
  Scheduler& s = p.s;
  zmq::context_t& ctx = p.ctx;
  Job2& a = p.a;
  Job2& b = p.b;
  ReportPhases(a, 300, 300, {});
  ReportPhases(b, 250, 250, {});
  const auto ta = a.r0->Expect<proto::TurnPush>(5000);
  const auto tb = b.r0->Expect<proto::TurnPush>(5000);
  ASSERT_TRUE(ta && tb) << s.Log();
  ASSERT_TRUE(b.r1->Expect<proto::TurnPush>(5000));
  ASSERT_EQ(ta->turns.count, 1u);
  ASSERT_EQ(tb->turns.count, 1u);
  EXPECT_TRUE(ta->send_edges);
  EXPECT_FALSE(ta->turns.partners[0].higher);
  // Their wire times from their bytes at 200 Mbit/s (ReportPhases: 300 and 250 ms with a 10 %
  // margin taken out), the other's compute as reported.
  EXPECT_NEAR(static_cast<double>(ta->turns.wire_ns), 300e6 / 1.1, 1e6);
  EXPECT_NEAR(static_cast<double>(ta->turns.partners[0].wire_ns), 250e6 / 1.1, 1e6);
  EXPECT_EQ(ta->turns.partners[0].compute_ns, 250 * kMs);
  const uint64_t id_a = tb->turns.partners[0].job;

  const int64_t at = RealtimeNs();
  a.r0->Send(proto::PhaseEdge{"a", 0, true, at});
  for (ProtoClient* r : {b.r0.get(), b.r1.get()}) {
    const auto e = r->Expect<proto::TurnEdge>();
    ASSERT_TRUE(e) << s.Log();
    EXPECT_EQ(e->job_id, "b");
    EXPECT_EQ(e->partner, id_a);
    EXPECT_TRUE(e->begun);
    EXPECT_EQ(e->at_ns, at);
  }
  a.r1->Send(proto::PhaseEdge{"a", 1, false, at + 1});
  EXPECT_FALSE(b.r0->Expect<proto::TurnEdge>(300));
  // The relay's share of the 2 ms budget on loopback: an edge sent to its arrival at a partner
  // (printed; the machine's load sets it, not the test).
  std::vector<int64_t> relay;
  for (int i = 0; i < 50; ++i) {
    const int64_t sent = RealtimeNs();
    a.r0->Send(proto::PhaseEdge{"a", 0, i % 2 == 0, sent});
    if (!b.r0->Expect<proto::TurnEdge>()) break;
    relay.push_back(RealtimeNs() - sent);
    b.r1->Expect<proto::TurnEdge>();
  }
  ASSERT_EQ(relay.size(), 50u);
  std::sort(relay.begin(), relay.end());
  std::printf("turn edge relay on loopback: median %.0f us, p90 %.0f us, max %.0f us\n",
              static_cast<double>(relay[25]) / 1e3, static_cast<double>(relay[45]) / 1e3,
              static_cast<double>(relay.back()) / 1e3);
  // A phase edge for a rank that never said hello is refused.
  auto stranger = std::make_unique<ProtoClient>(ctx, s.Endpoint());
  stranger->Send(proto::PhaseEdge{"a", 0, false, at + 2});
  const auto refused = stranger->Expect<proto::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, proto::ErrorCode::kUnexpected);
  // One dated a second ahead of the scheduler's clock (its partners would keep it as the latest:
  // a phase that never ends) is refused and relayed to no one.
  a.r0->Send(proto::PhaseEdge{"a", 0, true, RealtimeNs() + 1'000 * kMs});
  const auto ahead = a.r0->Expect<proto::Error>();
  ASSERT_TRUE(ahead);
  EXPECT_EQ(ahead->code, proto::ErrorCode::kInvalid);
  EXPECT_NE(ahead->message.find("ahead of the scheduler's clock"), std::string::npos);
  EXPECT_FALSE(b.r0->Expect<proto::TurnEdge>(300));
  const std::string m = s.Metrics();
  EXPECT_NE(m.find("metronome_turn_edges_total{outcome=\"ahead\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("metronome_turn_edges_total{outcome=\"relayed\"} 51"), std::string::npos) << m;
  EXPECT_NE(m.find("metronome_turn_edges_total{outcome=\"other_rank\"} 1"), std::string::npos);
  EXPECT_NE(m.find("metronome_turn_edge_messages_total 102"), std::string::npos);

  Scheduler off({"--config", TwoRackConfig("turns-off.yaml", "  turns: false\n")});
  ASSERT_TRUE(off.Ready()) << off.Log();
  ProtoClient r(ctx, off.Endpoint());
  const auto w = r.Register("c", 0, 2, "h1", 1, proto::kFeatureTurns);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->features, 0u);
  r.Send(proto::PhaseEdge{"c", 0, true, RealtimeNs()});
  EXPECT_TRUE(r.Expect<proto::Error>());
  EXPECT_NE(off.Metrics().find("metronome_turn_edges_total{outcome=\"off\"} 1"), std::string::npos);
}

// Two such jobs of 1.2 s iterations: a rank speaks for its job for two of its periods (not one
// second), so the edges of its other ranks, a period apart, are not relayed too.
TEST(SchedulerEndpoint, ASlowJobsEdgesHaveOneSpeaker) {
  UplinkPair p("turns-slow.yaml");
  ASSERT_TRUE(p.s.Ready()) << p.s.Log();
  Scheduler& s = p.s;
  Job2& a = p.a;
  Job2& b = p.b;
  ReportPhases(a, 800, 800, {}, 1200);
  ReportPhases(b, 700, 700, {}, 1200);
  const auto tb = b.r0->Expect<proto::TurnPush>(5000);
  ASSERT_TRUE(tb && tb->turns.count == 1) << s.Log();
  a.r0->Send(proto::PhaseEdge{"a", 0, true, RealtimeNs()});
  ASSERT_TRUE(b.r0->Expect<proto::TurnEdge>()) << s.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  a.r1->Send(proto::PhaseEdge{"a", 1, true, RealtimeNs()});
  EXPECT_FALSE(b.r0->Expect<proto::TurnEdge>(300)) << "rank 1 spoke for the job too";
  EXPECT_NE(s.Metrics().find("metronome_turn_edges_total{outcome=\"other_rank\"} 1"),
            std::string::npos);
}

// The same two jobs, one of whose shims cannot take turns (on a GPU without the gate kernel it
// announces none): neither is pushed the other as a partner, nor asked for its edges (they would
// reach no one).
TEST(SchedulerEndpoint, AJobThatCannotTakeTurnsIsNobodysPartner) {
  UplinkPair p("turns-one.yaml", 0);
  ASSERT_TRUE(p.s.Ready()) << p.s.Log();
  ReportPhases(p.a, 300, 300, {});
  ReportPhases(p.b, 250, 250, {});
  // Once both are profiled the sets are computed again within a second (TurnsRefresh).
  ASSERT_TRUE(WaitFor([&] {
    const auto a = p.s.Get("/api/v1/jobs/a");
    const auto b = p.s.Get("/api/v1/jobs/b");
    return a && b && !(*a)["profile"].is_null() && !(*b)["profile"].is_null();
  })) << p.s.Log();
  const auto tb = p.b.r0->Expect<proto::TurnPush>(1500);
  EXPECT_TRUE(!tb || tb->turns.count == 0) << "pushed a partner that takes no turns";
  EXPECT_TRUE(!tb || !tb->send_edges) << "asked for edges that would reach no one";
}

// The same two jobs where their NICs (200 Mbit/s) are the narrow links and the racks' uplinks
// they share carry 2 Gbit/s: each alone uses a tenth of the uplink, sharing it costs them
// nothing, and neither is pushed a partner (kTurnsLinkShare, with the capacities of the
// service's topology).
TEST(SchedulerEndpoint, TwoJobsThatDoNotFillTheLinkTheyShareTakeNoTurns) {
  Scheduler s({"--config",
               TwoRackConfig("wide-uplinks.yaml", "planning:\n  max_stretch: 1.0\n", "2", "0.2")});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "a", "h1", "h3", 1, proto::kFeatureTurns);
  auto b = RegisterJob(ctx, s, "b", "h2", "h4", 1, proto::kFeatureTurns);
  ReportPhases(a, 300, 300, {});
  ReportPhases(b, 250, 250, {});
  ASSERT_TRUE(a.r0->Expect<proto::TimetablePush>(5000)) << s.Log();
  ASSERT_TRUE(b.r0->Expect<proto::TimetablePush>(5000)) << s.Log();
  // Where they fill it, the sets come with the plan (the test above: within a tick of it).
  EXPECT_FALSE(a.r0->Expect<proto::TurnPush>(2000));
  EXPECT_FALSE(b.r0->Expect<proto::TurnPush>(500));
  EXPECT_NE(s.Metrics().find("metronome_turn_pushes_total 0"), std::string::npos);
}

TEST(SchedulerEndpoint, ReplansWhenJobsJoinAndLeave) {
  Scheduler s({"--rank-timeout-ms", "400"});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1");
  ReportProfile(a, 100 * kMs, 40 * kMs);
  auto b = RegisterJob(ctx, s, "job-b", "n2", "n3");
  ReportProfile(b, 100 * kMs, 40 * kMs);
  auto c = RegisterJob(ctx, s, "job-c", "n4", "n5");
  ReportProfile(c, 100 * kMs, 10 * kMs);
  a.r0->Poll(50);
  b.r0->Poll(50);
  EXPECT_TRUE(Disjoint(*a.r0->timetable, *b.r0->timetable));
  EXPECT_TRUE(Disjoint(*a.r0->timetable, *c.r0->timetable));
  EXPECT_TRUE(Disjoint(*b.r0->timetable, *c.r0->timetable));
  auto links = s.Get("/api/v1/links");
  ASSERT_TRUE(links);
  EXPECT_EQ((*links)["links"][0]["jobs"].size(), 3u);
  double load = 0;
  for (const ProtoClient* r0 : {a.r0.get(), b.r0.get(), c.r0.get()}) {
    load += static_cast<double>(r0->timetable->window_ns) /
            static_cast<double>(r0->timetable->period_ns);
  }
  EXPECT_NEAR((*links)["links"][0]["planned_utilization"].get<double>(), load, 1e-6);
  EXPECT_GT(load, 0.8);
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_replans_total{reason=\"join\"}"), 3);

  // B leaves with a bye from both ranks.
  b.r0->Send(proto::Bye{"job-b", 0, "done"});
  b.r1->Send(proto::Bye{"job-b", 1, "done"});
  ASSERT_TRUE(WaitFor([&] { return (*s.Get("/api/v1/jobs"))["jobs"].size() == 2; }));
  std::string m = s.Metrics();
  EXPECT_EQ(MetricValue(m, "metronome_jobs_removed_total{reason=\"bye\"}"), 1);
  // The job leaves the registry at once; the planning thread re-plans the rest after.
  EXPECT_TRUE(WaitFor(
      [&] { return MetricValue(s.Metrics(), "metronome_replans_total{reason=\"leave\"}") >= 1; }));

  // C stops reporting: removed after the rank timeout, while A keeps reporting.
  const bool gone = WaitFor(
      [&] {
        a.r0->Send(a.r0->MakeReport("job-a", 0, 100 * kMs, 40 * kMs));
        a.r1->Send(a.r1->MakeReport("job-a", 1, 100 * kMs, 40 * kMs));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return (*s.Get("/api/v1/jobs"))["jobs"].size() == 1;
      },
      5000);
  ASSERT_TRUE(gone);
  m = s.Metrics();
  EXPECT_EQ(MetricValue(m, "metronome_jobs_removed_total{reason=\"timeout\"}"), 1);
  EXPECT_GE(MetricValue(m, "metronome_rank_timeouts_total"), 2);
  EXPECT_TRUE(WaitFor(
      [&] { return MetricValue(s.Metrics(), "metronome_replans_total{reason=\"leave\"}") >= 2; }));
  auto after = s.Get("/api/v1/links");
  EXPECT_EQ((*after)["links"][0]["jobs"], json::array({"job-a"}));
}

// The silence scan visits a share of the jobs each tick (here every job in five ticks): every
// silent job still goes, and none that reports.
TEST(SchedulerEndpoint, TheSilenceScanInSharesDropsEverySilentJobAndNoOther) {
  const std::string cfg = TempPath("silence-shares.yaml");
  WriteFile(cfg, "controller:\n  tick_ms: 10\n");
  Scheduler s({"--config", cfg, "--rank-timeout-ms", "1000"});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  std::vector<std::unique_ptr<ProtoClient>> silent;
  for (int i = 0; i < 12; ++i) {
    silent.push_back(std::make_unique<ProtoClient>(ctx, s.Endpoint()));
    const std::string id = std::to_string(i);
    ASSERT_TRUE(silent.back()->Register(std::string("quiet-").append(id), 0, 1,
                                        std::string("n").append(id)));
  }
  ProtoClient keep(ctx, s.Endpoint());
  ASSERT_TRUE(keep.Register("keeps-reporting", 0, 1, "n20"));
  ASSERT_TRUE(WaitFor(
      [&] {
        keep.Send(keep.MakeReport("keeps-reporting", 0, 100 * kMs, 10 * kMs));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return MetricValue(s.Metrics(), "metronome_jobs") == 1;
      },
      10000))
      << s.Metrics();
  const auto jobs = s.Get("/api/v1/jobs");
  ASSERT_TRUE(jobs);
  ASSERT_EQ((*jobs)["jobs"].size(), 1u);
  EXPECT_EQ((*jobs)["jobs"][0]["job"], "keeps-reporting");
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_jobs_removed_total{reason=\"timeout\"}"), 12);
}

TEST(SchedulerEndpoint, OfflineRecalculationRunsInTheBackground) {
  Scheduler s({"--offline-interval-ms", "200"});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1", 2);
  ReportProfile(a, 100 * kMs, 30 * kMs);
  auto b = RegisterJob(ctx, s, "job-b", "n2", "n3", 1);
  ReportProfile(b, 150 * kMs, 40 * kMs);
  auto c = RegisterJob(ctx, s, "job-c", "n4", "n5", 0);
  ReportProfile(c, 300 * kMs, 60 * kMs);
  // Each run ends in one counted outcome (applied, no_gain, stale or too_disruptive).
  EXPECT_TRUE(
      WaitFor([&] { return MetricSum(s.Metrics(), "metronome_offline_runs_total") >= 2; }, 5000))
      << s.Metrics();
  EXPECT_TRUE(s.Get("/healthz"));
}

TEST(SchedulerEndpoint, ClientsReRegisterAfterRestart) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1");
  ReportProfile(a, 100 * kMs, 30 * kMs);
  EXPECT_EQ(s.Stop(), 0) << "scheduler did not stop cleanly on SIGTERM";
  s.Start();
  ASSERT_TRUE(s.Ready()) << s.Log();
  EXPECT_EQ((*s.Get("/api/v1/jobs"))["jobs"].size(), 0u);
  // The shims keep reporting; the new scheduler does not know them and says so; they register
  // again (as the shim does on an Error of kind "unexpected") and get their timetable back.
  for (auto* c : {a.r0.get(), a.r1.get()}) {
    const uint32_t rank = c == a.r0.get() ? 0 : 1;
    const bool answered = WaitFor(
        [&] {
          c->Send(c->MakeReport("job-a", rank, 100 * kMs, 30 * kMs));
          return c->Expect<proto::Error>(300).has_value();
        },
        8000);
    ASSERT_TRUE(answered) << "no error for an unregistered report after restart";
    EXPECT_EQ(c->errors.back().code, proto::ErrorCode::kUnexpected);
    ASSERT_TRUE(c->Register("job-a", rank, 2, rank == 0 ? "n0" : "n1"));
  }
  a.r0->Send(a.r0->MakeReport("job-a", 0, 100 * kMs, 30 * kMs));
  ASSERT_TRUE(a.r0->Expect<proto::TimetablePush>());
  ASSERT_TRUE(a.r1->Expect<proto::TimetablePush>());
  auto jobs = s.Get("/api/v1/jobs");
  ASSERT_EQ((*jobs)["jobs"].size(), 1u);
  EXPECT_TRUE((*jobs)["jobs"][0]["planned"].get<bool>());
  EXPECT_EQ((*jobs)["jobs"][0]["ranks"], 2);
}

TEST(SchedulerEndpoint, ReRegistrationRepushesTheTimetable) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  auto a = RegisterJob(ctx, s, "job-a", "n0", "n1");
  ReportProfile(a, 100 * kMs, 30 * kMs);
  // Rank 1's process restarts: a new DEALER registers the same (job, rank).
  ProtoClient again(ctx, s.Endpoint());
  ASSERT_TRUE(again.Register("job-a", 1, 2, "n1"));
  auto push = again.Expect<proto::TimetablePush>();
  ASSERT_TRUE(push);
  EXPECT_EQ(push->timetable.version, a.r0->timetable->version);
  EXPECT_EQ(MetricValue(s.Metrics(), "metronome_registrations_total{kind=\"reregistration\"}"), 1);
  // The old connection no longer speaks for rank 1.
  a.r1->Send(a.r1->MakeReport("job-a", 1, 100 * kMs, 30 * kMs));
  auto err = a.r1->Expect<proto::Error>();
  ASSERT_TRUE(err);
  EXPECT_EQ(err->code, proto::ErrorCode::kUnexpected);
}

std::string PackWrongTypeHello() {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(proto::kProtocolVersion);
  pk.pack(static_cast<uint32_t>(proto::MessageType::kHello));
  pk.pack_array(8);
  pk.pack(std::string("job"));
  pk.pack(std::string("node"));
  pk.pack(std::string("rank-should-be-an-integer"));
  pk.pack(2);
  pk.pack(1);
  pk.pack(1);
  pk.pack(1);
  pk.pack(std::string("v"));
  return {buf.data(), buf.size()};
}

std::string PackEnvelope(uint32_t version, uint32_t type) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(version);
  pk.pack(type);
  pk.pack_array(0);
  return {buf.data(), buf.size()};
}

TEST(SchedulerEndpoint, BadInputIsAnsweredCountedAndNeverFatal) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  ProtoClient c(ctx, s.Endpoint());
  int sent = 0, answered = 0;
  auto bad = [&](const std::string& bytes) {
    c.SendRaw(bytes);
    ++sent;
    if (c.Expect<proto::Error>(1000)) ++answered;
  };
  const std::string hello = proto::Encode(c.MakeHello("job", 0, 2, "n0"));
  bad("");                                         // empty
  bad(hello.substr(0, hello.size() / 2));          // truncated
  bad(hello.substr(0, 1));                         // truncated to the array header
  bad(std::string(100'000, '\x01'));               // oversized (above 64 KiB, below 1 MiB)
  bad(PackWrongTypeHello());                       // wrong type in a field
  bad(PackEnvelope(99, 1));                        // protocol version
  bad(PackEnvelope(proto::kProtocolVersion, 77));  // unknown type
  bad(hello + "garbage");                          // trailing bytes
  bad(proto::Encode(proto::Welcome{}));            // a scheduler-to-shim message
  bad(proto::Encode(c.MakeReport("job", 0, 100 * kMs, 30 * kMs)));  // report before hello
  bad(proto::Encode(proto::Bye{"job", 0, "x"}));                    // bye before hello
  c.SendFrames({"two", "frames"});                                  // multipart
  ++sent;
  if (c.Expect<proto::Error>(1000)) ++answered;
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string r(1 + rng() % 400, '\0');
    for (auto& ch : r) ch = static_cast<char>(rng());
    bad(r);
  }
  EXPECT_EQ(answered, sent) << "every rejected message gets an Error reply";

  // Still serving: a ping is answered, registration works, HTTP is up.
  c.Send(proto::ClockPing{7, RealtimeNs()});
  ASSERT_TRUE(c.Expect<proto::ClockPong>());
  ASSERT_TRUE(c.Register("job", 0, 2, "n0"));
  ASSERT_TRUE(s.Get("/healthz"));

  const std::string m = s.Metrics();
  EXPECT_EQ(MetricSum(m, "metronome_rejected_messages_total"), sent);
  EXPECT_EQ(MetricValue(m, "metronome_rejected_messages_total{reason=\"empty\"}"), 1);
  EXPECT_EQ(MetricValue(m, "metronome_rejected_messages_total{reason=\"too_large\"}"), 1);
  EXPECT_EQ(MetricValue(m, "metronome_rejected_messages_total{reason=\"bad_field\"}"), 1);
  EXPECT_EQ(MetricValue(m, "metronome_rejected_messages_total{reason=\"version\"}"), 1);
  EXPECT_EQ(MetricValue(m, "metronome_rejected_messages_total{reason=\"multipart\"}"), 1);
  EXPECT_EQ(MetricValue(m, "metronome_rejected_messages_total{reason=\"unexpected\"}"), 3);

  // A frame above libzmq's 1 MiB limit drops that peer's connection; the others carry on.
  ProtoClient huge(ctx, s.Endpoint());
  huge.SendRaw(std::string(2 << 20, 'x'));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  c.Send(proto::ClockPing{8, RealtimeNs()});
  ASSERT_TRUE(c.Expect<proto::ClockPong>());
}

TEST(SchedulerEndpoint, CurveAuthenticatesAndEncrypts) {
  // Keys made by the scheduler's own generator.
  const std::string prefix = TempPath("curve");
  auto [krc, kout] = RunToEnd({METRONOME_SCHEDULER_BIN, "--generate-curve-keys", prefix}, "keygen");
  ASSERT_EQ(krc, 0) << kout;
  const std::string pub_file = prefix + ".pub", sec_file = prefix + ".key";
  std::string pub = ReadFile(pub_file);
  pub = pub.substr(0, pub.find('\n'));
  ASSERT_EQ(pub.size(), 40u);
  Scheduler s({"--curve-secret-key-file", sec_file, "--curve-public-key-file", pub_file});
  ASSERT_TRUE(s.Ready()) << s.Log();
  EXPECT_TRUE((*s.Get("/api/v1/status"))["curve"].get<bool>());
  zmq::context_t ctx;
  ProtoClient secure(ctx, s.Endpoint(), 0, pub);
  ASSERT_TRUE(secure.Register("job-a", 0, 2, "n0")) << "a CURVE client with the server key";
  ProtoClient plain(ctx, s.Endpoint());
  plain.Send(plain.MakeHello("job-a", 1, 2, "n1"));
  EXPECT_FALSE(plain.Expect<proto::Welcome>(500)) << "a plain client must not get through";
  char other_pub[41] = {}, other_sec[41] = {};
  zmq_curve_keypair(other_pub, other_sec);
  ProtoClient wrong_key(ctx, s.Endpoint(), 0, other_pub);
  wrong_key.Send(wrong_key.MakeHello("job-a", 1, 2, "n1"));
  EXPECT_FALSE(wrong_key.Expect<proto::Welcome>(500)) << "a client with another server key";
  secure.Send(proto::ClockPing{1, RealtimeNs()});
  EXPECT_TRUE(secure.Expect<proto::ClockPong>());
  EXPECT_EQ((*s.Get("/api/v1/status"))["ranks"], 1);

  // A public key that does not belong to the secret key: a clear configuration error.
  WriteFile(pub_file, std::string(other_pub));
  auto [rc, out] =
      RunToEnd({METRONOME_SCHEDULER_BIN, "--listen", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0",
                "--curve-secret-key-file", sec_file, "--curve-public-key-file", pub_file},
               "curve-mismatch");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("curve.public_key_file"), std::string::npos) << out;
}

}  // namespace
}  // namespace metronome::testing
