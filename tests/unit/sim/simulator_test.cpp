// The fluid engine against figures computed by hand, the gate driven by the planner, placement
// and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "metronome/sim/cluster.hpp"
#include "metronome/sim/placement.hpp"
#include "metronome/sim/report.hpp"
#include "metronome/sim/simulator.hpp"

namespace metronome::sim {
namespace {

// Two racks with one 8-GPU node each; rack uplinks 10 Gbit/s (1.25 GB/s), NICs 100 Gbit/s.
// A 2-rank job with one rank per rack moves V = 2·(2−1)/2 · S = S bytes over each rack uplink:
// S = 125 MB → 100 ms alone. Compute 150 ms → natural period 250 ms.
std::string TwoRacks(int jobs, const std::string& noise = "{}", std::uint64_t seed = 1) {
  std::string s = "seed: " + std::to_string(seed) + "\nnoise: " + noise + R"(
topology:
  racks:
    - {name: r1, uplink_gbps: 10, nodes: [{name: a, gpus: 8, gpu: A100, nic_gbps: 100}]}
    - {name: r2, uplink_gbps: 10, nodes: [{name: b, gpus: 8, gpu: A100, nic_gbps: 100}]}
jobs:
)";
  for (int i = 0; i < jobs; ++i) {
    s += "  - {name: j" + std::to_string(i) +
         ", compute_ms: 150, gradient_mb: 125, gpus: 2, iterations: 200, nodes: [a, b]}\n";
  }
  return s;
}

RunResult RunYaml(const std::string& yaml, const std::string& policy) {
  const Scenario s = ParseScenario(yaml);
  ValidateScenario(s, {});
  return Simulate(s, PolicyByName(policy));
}

TEST(Simulator, SingleJobRunsAtItsNaturalPeriod) {
  for (const char* policy : {"k8s-default", "network-aware", "metronome", "cassini"}) {
    const RunResult r = RunYaml(TwoRacks(1), policy);
    ASSERT_EQ(r.jobs.size(), 1u);
    EXPECT_NEAR(r.jobs[0].natural_ms, 250.0, 1e-9) << policy;
    // A gated policy may shift the job once into its slot (at most one period).
    const double shift_ms = std::string(policy) == "cassini" ? 250.0 / 200 : 1e-6;
    EXPECT_NEAR(r.jobs[0].mean_iteration_ms, 250.0, shift_ms) << policy;
    EXPECT_NEAR(r.jobs[0].jct_s, 200 * 0.25, shift_ms * 200 / 1e3 + 1e-9) << policy;
    EXPECT_EQ(r.jobs[0].links_crossed, 4) << policy;  // two NICs, two rack uplinks
  }
}

// Slow phases (noise.slow_phase_p / slow_phase_factor): every phase moves U(1, f) times its
// bytes, so a job alone averages 150 + 100·(1 + f)/2 ms per iteration; with p = 0, exactly 250.
TEST(Simulator, SlowPhasesStretchCommunicationByTheirFactor) {
  const RunResult all =
      RunYaml(TwoRacks(1, "{slow_phase_p: 1, slow_phase_factor: 2}"), "k8s-default");
  EXPECT_NEAR(all.jobs[0].mean_iteration_ms, 150.0 + 100.0 * 1.5, 5.0);
  const RunResult none =
      RunYaml(TwoRacks(1, "{slow_phase_p: 0, slow_phase_factor: 2}"), "k8s-default");
  EXPECT_NEAR(none.jobs[0].mean_iteration_ms, 250.0, 1e-6);
}

// Without time scheduling, two identical jobs start together and their transfers overlap
// completely: each gets half of 1.25 GB/s, so communication takes 200 ms and every iteration
// 150 + 200 = 350 ms; the rack uplinks carry 2·125 MB per 350 ms = 0.714 GB/s while busy.
TEST(Simulator, TwoJobsWithoutTimeSchedulingSlowDownAsTheFluidModelPredicts) {
  const RunResult r = RunYaml(TwoRacks(2), "k8s-default");
  for (const JobResult& j : r.jobs) {
    EXPECT_NEAR(j.mean_iteration_ms, 350.0, 1e-6);
    EXPECT_NEAR(j.comm_ms, 200.0, 1e-6);
    EXPECT_NEAR(j.slowdown, 1.4, 1e-6);
  }
  EXPECT_NEAR(r.summary.overlap_fraction, 1.0, 1e-9);
  for (const LinkResult& l : r.links) {
    if (l.name == "r1/up" || l.name == "r2/up") {
      EXPECT_NEAR(l.utilization, 250e6 / 0.35 / 1.25e9, 1e-6);
    }
  }
}

// The scheduler learns the jobs from their shims' reports, as the service does: for their first
// two seconds or so (five phases for a confident period, then the next report) they run
// ungated and collide, six iterations of 350 ms out of 200. After that they take turns.
TEST(Simulator, TwoJobsWithMetronomeInterleave) {
  const RunResult r = RunYaml(TwoRacks(2), "metronome");
  EXPECT_LT(r.summary.overlap_fraction, 0.05);
  for (const JobResult& j : r.jobs) {
    EXPECT_FALSE(j.best_effort) << j.name;
    EXPECT_NEAR(j.comm_ms, 100.0, 5.0) << j.name;  // 100 ms alone, 200 ms while learned
    EXPECT_LT(j.mean_iteration_ms, 250.0 * 1.03) << j.name;
  }
  // And with noise (2 % compute jitter, 50 µs clock skew), the cushion keeps them apart.
  const RunResult n =
      RunYaml(TwoRacks(2, "{compute_jitter: 0.02, clock_skew_us: 50}"), "metronome");
  EXPECT_LT(n.summary.overlap_fraction, 0.05);
  for (const JobResult& j : n.jobs) EXPECT_LT(j.slowdown, 1.05) << j.name;
  // The shims measure the jitter (σ = 2 % of 150 ms = 3 ms): the planned period has a few
  // milliseconds of headroom over 250 ms, and a cushion of 3σ follows each window.
  for (const JobResult& j : n.jobs) {
    EXPECT_GT(j.mean_period_ms, 250.0) << j.name;
    EXPECT_LT(j.mean_period_ms, 250.0 * 1.05) << j.name;
  }
}

TEST(Simulator, NoCushionAblationLeavesNoLateSlack) {
  const RunResult r =
      RunYaml(TwoRacks(2, "{compute_jitter: 0.02, clock_skew_us: 50}"), "metronome-no-cushion");
  // The job that finishes first does so while the other still runs: its last timetable.
  const JobResult& j = r.jobs[0].jct_s <= r.jobs[1].jct_s ? r.jobs[0] : r.jobs[1];
  EXPECT_GT(j.window_ms, 0.0);
  EXPECT_LT(j.window_ms, j.period_ms);
  EXPECT_EQ(j.late_slack_ms, 0.0);
}

TEST(Simulator, JobInsideOneNodeCrossesNoLink) {
  std::string yaml = TwoRacks(0);
  yaml +=
      "  - {name: local, compute_ms: 100, gradient_mb: 300, gpus: 8, iterations: 10, nodes: [a]}\n";
  const RunResult r = RunYaml(yaml, "k8s-default");
  EXPECT_EQ(r.jobs[0].links_crossed, 0);
  EXPECT_TRUE(r.links.empty());
  // 2·7/8 · 300 MB over the default 2400 Gbit/s intra-node bandwidth = 1.75 ms.
  EXPECT_NEAR(r.jobs[0].mean_iteration_ms, 100.0 + 525e6 / 300e9 * 1e3, 1e-6);
}

TEST(Simulator, JsonWithLinksNamesTheLinksEachJobCrossed) {
  const RunResult r = RunYaml(TwoRacks(1), "k8s-default");
  const nlohmann::json with = ToJson(r, true);
  const nlohmann::json without = ToJson(r, false);
  // a and b sit in different racks: the job crosses both nodes' and both racks' uplinks.
  const auto links = with["jobs"][0]["links"].get<std::vector<std::string>>();
  EXPECT_EQ(std::set<std::string>(links.begin(), links.end()),
            (std::set<std::string>{"a/up", "b/up", "r1/up", "r2/up"}));
  EXPECT_EQ(with["jobs"][0]["links_crossed"], 4);
  EXPECT_FALSE(without["jobs"][0].contains("links"));
}

TEST(Simulator, SameSeedSameOutputOtherSeedOtherOutput) {
  const std::string noise = "{compute_jitter: 0.05, clock_skew_us: 100}";
  for (const char* policy : {"k8s-default", "metronome"}) {
    auto strip = [](nlohmann::json j) {
      j["summary"].erase("wall_s");
      j.erase("scheduler");
      return j.dump();
    };
    const std::string a = strip(ToJson(RunYaml(TwoRacks(3, noise, 11), policy), true));
    const std::string b = strip(ToJson(RunYaml(TwoRacks(3, noise, 11), policy), true));
    const std::string c = strip(ToJson(RunYaml(TwoRacks(3, noise, 12), policy), true));
    EXPECT_EQ(a, b) << policy;
    EXPECT_NE(a, c) << policy;
  }
}

TEST(Placement, SpreadUsesManyNodesPackUsesOne) {
  Scenario s;
  for (int r = 0; r < 2; ++r) {
    RackSpec rack;
    rack.name = std::string("r").append(std::to_string(r));
    rack.uplink_gbps = 10;
    for (int n = 0; n < 4; ++n) {
      NodeSpec node;
      node.name = rack.name;
      node.name.append("n").append(std::to_string(n));
      node.gpus = 4;
      node.gpu = "A100";
      node.nic_gbps = 100;
      rack.nodes.push_back(node);
    }
    s.racks.push_back(rack);
  }
  const Cluster c = Cluster::FromScenario(s);
  std::vector<int> free_gpus(c.nodes.size(), 4);
  JobSpec job;
  job.gpus = 4;
  std::mt19937_64 rng(1);
  const auto spread = PlaceJob(PlacementKind::kSpread, c, free_gpus, job, rng);
  ASSERT_TRUE(spread);
  EXPECT_EQ(spread->node_gpus.size(), 4u);
  const auto pack = PlaceJob(PlacementKind::kPack, c, free_gpus, job, rng);
  ASSERT_TRUE(pack);
  EXPECT_EQ(pack->node_gpus.size(), 1u);
  EXPECT_TRUE(c.LinksCrossed(pack->Nodes()).empty());
  // 6 GPUs: one rack, two nodes — two NIC links, no rack uplink.
  job.gpus = 6;
  const auto pack6 = PlaceJob(PlacementKind::kPack, c, free_gpus, job, rng);
  ASSERT_TRUE(pack6);
  EXPECT_EQ(pack6->node_gpus.size(), 2u);
  EXPECT_EQ(c.LinksCrossed(pack6->Nodes()).size(), 2u);
  // Nothing fits a 40-GPU job.
  job.gpus = 40;
  EXPECT_FALSE(PlaceJob(PlacementKind::kPack, c, free_gpus, job, rng));
  EXPECT_FALSE(PlaceJob(PlacementKind::kSpread, c, free_gpus, job, rng));
}

TEST(Simulator, QueuedJobStartsWhenGpusFree) {
  std::string yaml = TwoRacks(0);
  yaml += "  - {name: big, compute_ms: 100, gradient_mb: 1, gpus: 16, iterations: 10}\n";
  yaml +=
      "  - {name: next, compute_ms: 100, gradient_mb: 1, gpus: 1, iterations: 10, arrival_s: "
      "0.1}\n";
  const RunResult r = RunYaml(yaml, "network-aware");
  EXPECT_NEAR(r.jobs[1].start_s, r.jobs[0].finish_s, 1e-9);
  EXPECT_GT(r.jobs[1].jct_s, r.jobs[0].jct_s - 0.1);
}

}  // namespace
}  // namespace metronome::sim

namespace metronome::sim {
namespace {

// A node selector confines a job to nodes of its GPU type, even when that costs links.
TEST(Placement, GpuSelectorConfinesTheJob) {
  const std::string yaml = R"(
topology:
  racks:
    - {name: r1, uplink_gbps: 10, nodes: [{name: a1, gpus: 8, gpu: A100, nic_gbps: 100}, {name: v1, gpus: 4, gpu: V100, nic_gbps: 50}]}
    - {name: r2, uplink_gbps: 10, nodes: [{name: a2, gpus: 8, gpu: A100, nic_gbps: 100}, {name: v2, gpus: 4, gpu: V100, nic_gbps: 50}]}
jobs:
  - {name: any, compute_ms: 100, gradient_mb: 10, gpus: 8, iterations: 5}
  - {name: v100, compute_ms: 100, gradient_mb: 10, gpus: 8, iterations: 5, gpu: V100}
)";
  const Scenario s = ParseScenario(yaml);
  ValidateScenario(s, {});
  const RunResult r = Simulate(s, PolicyByName("network-aware"));
  EXPECT_EQ(r.jobs[0].links_crossed, 0);  // one A100 node
  EXPECT_EQ(r.jobs[1].links_crossed, 4);  // v1 and v2: two NICs and two rack uplinks
  Scenario bad = s;
  bad.jobs[1].gpus = 9;
  try {
    ValidateScenario(bad, {});
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("jobs[1].gpu"), std::string::npos) << e.what();
  }
}

// Every policy runs a queue of arrivals to completion; the metronome policies place jobs
// through the planner's what-if when there is a choice.
TEST(Simulator, EveryPolicyCompletesEveryJob) {
  std::string yaml = R"(
seed: 4
noise: {compute_jitter: 0.02, clock_skew_us: 50, profile_error: 0.05}
topology:
  racks:
)";
  for (int r = 0; r < 3; ++r) {
    yaml += "    - {name: r" + std::to_string(r) + ", uplink_gbps: 20, nodes: [";
    for (int n = 0; n < 3; ++n) {
      yaml += std::string(n ? ", " : "") + "{name: r" + std::to_string(r) + "n" +
              std::to_string(n) + ", gpus: 4, gpu: A100, nic_gbps: 25}";
    }
    yaml += "]}\n";
  }
  yaml += "jobs:\n";
  for (int i = 0; i < 12; ++i) {
    yaml += "  - {name: j" + std::to_string(i) + ", compute_ms: " + std::to_string(80 + 20 * i) +
            ", gradient_mb: " + std::to_string(50 + 10 * i) +
            ", gpus: " + std::to_string(2 + 2 * (i % 4)) +
            ", iterations: 60, priority: " + std::to_string(i % 4) +
            ", arrival_s: " + std::to_string(i) + "}\n";
  }
  const Scenario s = ParseScenario(yaml);
  ValidateScenario(s, {});
  for (const std::string& p : PolicyNames()) {
    const RunResult r = Simulate(s, PolicyByName(p));
    for (const JobResult& j : r.jobs) {
      EXPECT_GT(j.finish_s, j.arrival_s) << p << " " << j.name;
      if (p == "network-aware-alone") {
        EXPECT_NEAR(j.slowdown, 1.0, 0.02) << p << " " << j.name;  // its compute jitter only
      } else {
        EXPECT_GE(j.slowdown, 0.999) << p << " " << j.name;
      }
    }
    EXPECT_GT(r.summary.avg_link_utilization, 0.0) << p;
    // The reference without contention lets a link carry every transfer at its rate alone.
    if (p == "network-aware-alone") continue;
    EXPECT_LE(r.summary.avg_link_utilization, 1.0 + 1e-9) << p;
  }
}

}  // namespace
}  // namespace metronome::sim

namespace metronome::sim {
namespace {

// With a wrong profile (10 % compute error), the controller measures the real compute phase and
// re-plans; without it the plan stays wrong.
TEST(Simulator, ControllerCorrectsAWrongProfile) {
  const std::string yaml = R"(
seed: 3
noise: {compute_jitter: 0.005, profile_error: 0.1}
topology:
  racks:
    - {name: r1, uplink_gbps: 10, nodes: [{name: a, gpus: 8, gpu: A100, nic_gbps: 100}]}
    - {name: r2, uplink_gbps: 10, nodes: [{name: b, gpus: 8, gpu: A100, nic_gbps: 100}]}
jobs:
  - {name: j0, compute_ms: 150, gradient_mb: 125, gpus: 2, iterations: 300, nodes: [a, b]}
  - {name: j1, compute_ms: 150, gradient_mb: 125, gpus: 2, iterations: 300, nodes: [a, b]}
)";
  const Scenario s = ParseScenario(yaml);
  const RunResult with = Simulate(s, PolicyByName("metronome"));
  const RunResult without = Simulate(s, PolicyByName("metronome-no-controller"));
  EXPECT_GE(with.scheduler.controller_replans, 1u);
  EXPECT_EQ(without.scheduler.controller_replans, 0u);
  EXPECT_LE(with.summary.weighted_jct_s, without.summary.weighted_jct_s * 1.001);
}

}  // namespace
}  // namespace metronome::sim

namespace metronome::sim {
namespace {

// The CPU testbed's drifting-neighbour case (examples/scenarios/drifting-neighbour.yaml).
constexpr const char* kDriftingNeighbour = R"(
noise: {compute_jitter: 0.01, clock_skew_us: 50, start_jitter_s: 1.0}
topology:
  racks:
    - name: r1
      uplink_gbps: 0.2
      nodes: [{name: h1, gpus: 1, gpu: A100, nic_gbps: 1}, {name: h2, gpus: 1, gpu: A100, nic_gbps: 1},
              {name: h3, gpus: 1, gpu: A100, nic_gbps: 1}]
    - name: r2
      uplink_gbps: 0.2
      nodes: [{name: h4, gpus: 1, gpu: A100, nic_gbps: 1}, {name: h5, gpus: 1, gpu: A100, nic_gbps: 1},
              {name: h6, gpus: 1, gpu: A100, nic_gbps: 1}]
jobs:
  - {name: j1, compute_ms: 300, gradient_mb: 4, gpus: 2, iterations: 100, priority: high, nodes: [h1, h4]}
  - {name: j2, compute_ms: 300, gradient_mb: 4, gpus: 2, iterations: 100, priority: normal, nodes: [h2, h5]}
  - {name: j3, compute_ms: 100, gradient_mb: 2, gpus: 2, iterations: 200, priority: low, nodes: [h3, h6]}
)";

// A pair that takes turns and a low-priority job whose phase (80 ms every 180 ms) fits neither
// between their windows nor at a harmonic of their period. The service's planning stretches the
// low-priority job to a period that interleaves (about 322 ms) and keeps the pair at its own
// (about 476 ms, natural 460): ahead of network-aware placement alone on every seed (weighted
// JCT about 50 s against 57-59 s), the high-priority job within 5 % of its natural pace.
// (The overrun rule that this case used to need is the service's, pinned by Controller.*.)
// One high-priority job (80 ms on the wire every 280 ms) and three low-priority neighbours of
// unrelated periods on one 10 Gbit/s link, offered load 1.2 (generate.py --load-sweep, n = 3,
// seed 1). The neighbours yield to the high job's window, at their phase starts and between
// their collectives: it runs within 10 % of solo (1.06 measured; 1.40 without time scheduling,
// 1.25 when the neighbours drifted over it) and the priority-weighted JCT is lower.
constexpr const char* kLoadSweep3 = R"(
seed: 1
noise: {compute_jitter: 0.01, clock_skew_us: 50}
topology:
  racks:
    - name: r1
      uplink_gbps: 10
      nodes: [{name: r1n0, gpus: 4, gpu: A100, nic_gbps: 100}, {name: r1n1, gpus: 4, gpu: A100, nic_gbps: 100},
              {name: r1n2, gpus: 4, gpu: A100, nic_gbps: 100}, {name: r1n3, gpus: 4, gpu: A100, nic_gbps: 100}]
    - name: r2
      uplink_gbps: 10
      nodes: [{name: r2n0, gpus: 4, gpu: A100, nic_gbps: 100}, {name: r2n1, gpus: 4, gpu: A100, nic_gbps: 100},
              {name: r2n2, gpus: 4, gpu: A100, nic_gbps: 100}, {name: r2n3, gpus: 4, gpu: A100, nic_gbps: 100}]
jobs:
  - {name: high, compute_ms: 200, gradient_mb: 57.14, gpus: 8, iterations: 214, priority: high, nodes: [r1n0, r2n0]}
  - {name: n1, compute_ms: 160.5, gradient_mb: 44.51, gpus: 8, iterations: 269, priority: low, nodes: [r1n1, r2n1]}
  - {name: n2, compute_ms: 171.6, gradient_mb: 61.36, gpus: 8, iterations: 233, priority: low, nodes: [r1n2, r2n2]}
  - {name: n3, compute_ms: 204.6, gradient_mb: 62.94, gpus: 8, iterations: 204, priority: low, nodes: [r1n3, r2n3]}
)";

TEST(Simulator, LowerPriorityNeighboursYieldToTheHighJobsWindow) {
  const RunResult with = RunYaml(kLoadSweep3, "metronome");
  const RunResult without = RunYaml(kLoadSweep3, "network-aware");
  EXPECT_LT(with.summary.weighted_jct_s, 0.95 * without.summary.weighted_jct_s);
  std::uint64_t yields = 0;
  for (const JobResult& j : with.jobs) {
    if (j.name == "high") {
      EXPECT_LT(j.mean_iteration_ms, 1.10 * j.natural_ms);
      EXPECT_EQ(j.yields, 0u) << "the highest priority yields to nobody";
    } else {
      yields += j.yields;
    }
  }
  EXPECT_GT(yields, 100u);
  for (const JobResult& j : without.jobs) EXPECT_EQ(j.yields, 0u);
}

// A low-priority job arrives beside the high job of kLoadSweep3 and its first neighbour once the
// high job is gated (it takes turns with the neighbour), and ends before its shims have learned
// its rhythm (four phases; a profile needs five): it is never planned, yet it yields to the high
// job's window, as the service pushes a job not planned yet the gated windows above it
// (controller/observer_yields.hpp, decision 0016).
TEST(Simulator, AJobNotPlannedYetYieldsToTheGatedWindowAboveIt) {
  Scenario s = ParseScenario(kLoadSweep3);
  s.jobs.resize(2);  // the high job and n1
  JobSpec late = s.jobs.front();
  late.name = "late";
  late.priority = kPriorityLow;
  late.arrival_s = 10.0;
  late.iterations = 4;
  late.gradient_mb = 200.0;  // eight buckets: eight collectives a phase
  late.nodes = {"r1n2", "r2n2"};
  s.jobs.push_back(late);
  const RunResult r = Simulate(s, PolicyByName("metronome"));
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.jobs[0].yields, 0u) << "the highest priority yields to nobody";
  EXPECT_GT(r.jobs[2].yields, 0u) << "the unplanned job ran into the high job's window";
}

// Two jobs that spend most of their period on the wire, with unrelated periods (160 and 190 ms
// alone): no timetable serves both (Metronome changes nothing), and their phases collide. With
// the turn signal (common/turn.hpp, relayed 2 ms late) a phase that meets the other's holds for
// its rest: on average they run faster (neither loses more than 1 %), and the link carries one
// at a time far more often. Where one of them has the higher priority, it never holds.
TEST(Simulator, TheTwoJobsOfALinkTakeTurns) {
  std::string yaml = TwoRacks(0, "{compute_jitter: 0.02, clock_skew_us: 50}");
  yaml +=
      "  - {name: j0, compute_ms: 60, gradient_mb: 125, gpus: 2, iterations: 300, nodes: [a, b]}\n";
  const std::string second =
      "  - {name: j1, compute_ms: 70, gradient_mb: 150, gpus: 2, iterations: 300, nodes: [a, b]";
  const RunResult plain = RunYaml(yaml + second + "}\n", "metronome-no-turns");
  const RunResult turns = RunYaml(yaml + second + "}\n", "metronome");
  EXPECT_LT(turns.summary.avg_jct_s, 0.97 * plain.summary.avg_jct_s);
  EXPECT_LT(turns.summary.overlap_fraction, 0.6 * plain.summary.overlap_fraction);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(plain.jobs[i].yields, 0u);
    EXPECT_LT(turns.jobs[i].jct_s, 1.01 * plain.jobs[i].jct_s) << turns.jobs[i].name;
  }
  // j0 holds for j1; j1 (120 ms on the wire) does not for j0, which is back within 2 x 60 ms.
  EXPECT_GT(turns.jobs[0].yields, 10u);
  EXPECT_EQ(turns.jobs[1].yields, 0u);
  const RunResult ranked = RunYaml(yaml + second + ", priority: high}\n", "metronome");
  const RunResult ranked_plain =
      RunYaml(yaml + second + ", priority: high}\n", "metronome-no-turns");
  EXPECT_EQ(ranked.jobs[1].yields, 0u) << "the higher priority never holds for the lower";
  EXPECT_GT(ranked.jobs[0].yields, turns.jobs[0].yields);
  EXPECT_LT(ranked.jobs[1].jct_s, ranked_plain.jobs[1].jct_s);
  EXPECT_LT(ranked.summary.weighted_jct_s, 0.97 * ranked_plain.summary.weighted_jct_s);
}

// The high-priority job within 5 % of its natural pace on the median seed, and within 15 % on
// each: on seed 4 it ran at 1.06 (the normal job, left to drift, yields at its phase starts but
// cannot pause inside its one 4 MB collective, and a phase that began in a gap the low job then
// shared ran into j1's window); on seeds 1 and 3 it is within 5 %.
TEST(Simulator, ADriftingNeighbourIsStretchedToInterleave) {
  std::vector<double> high;
  for (const std::uint64_t seed : {1u, 3u, 4u}) {
    Scenario s = ParseScenario(kDriftingNeighbour);
    s.seed = seed;
    const RunResult with = Simulate(s, PolicyByName("metronome"));
    const RunResult without = Simulate(s, PolicyByName("network-aware"));
    EXPECT_LT(with.summary.weighted_jct_s, 0.95 * without.summary.weighted_jct_s)
        << "seed " << seed;
    for (const JobResult& j : with.jobs) {
      if (j.name == "j1") {
        high.push_back(j.mean_iteration_ms / j.natural_ms);
        EXPECT_LT(high.back(), 1.15) << "seed " << seed;
      }
    }
  }
  ASSERT_EQ(high.size(), 3u);
  std::sort(high.begin(), high.end());
  EXPECT_LT(high[1], 1.05);
}

}  // namespace
}  // namespace metronome::sim
