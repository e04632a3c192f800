// Scenario parsing: a good file parses; every bad one fails with a message naming the key.
#include <gtest/gtest.h>

#include "metronome/sim/scenario.hpp"

namespace metronome::sim {
namespace {

const char* const kGood = R"(
seed: 3
noise: {compute_jitter: 0.02, clock_skew_us: 50}
topology:
  racks:
    - name: r1
      uplink_gbps: 100
      nodes:
        - {name: n1, gpus: 8, gpu: A100, nic_gbps: 100}
        - {name: n2, gpus: 8, gpu: V100, nic_gbps: 50}
jobs:
  - name: j1
    compute_ms: 100
    gradient_mb: 50
    gpus: 16
    iterations: 20
    priority: high
    arrival_s: 1.5
    nodes: [n1, n2]
  - {name: j2, compute_ms: 10, gradient_mb: 1, gpus: 2, iterations: 5, priority: -3, chunk_kib: 128}
)";

TEST(Scenario, ParsesEveryKey) {
  const Scenario s = ParseScenario(kGood);
  EXPECT_EQ(s.seed, 3u);
  EXPECT_DOUBLE_EQ(s.noise.compute_jitter, 0.02);
  EXPECT_DOUBLE_EQ(s.noise.clock_skew_us, 50);
  ASSERT_EQ(s.racks.size(), 1u);
  EXPECT_EQ(s.racks[0].nodes[1].gpu, "V100");
  EXPECT_DOUBLE_EQ(s.racks[0].nodes[1].nic_gbps, 50);
  ASSERT_EQ(s.jobs.size(), 2u);
  EXPECT_EQ(s.jobs[0].priority, kPriorityHigh);
  EXPECT_EQ(s.jobs[1].priority, -3);
  EXPECT_DOUBLE_EQ(s.jobs[0].arrival_s, 1.5);
  EXPECT_EQ(s.jobs[0].nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(s.jobs[0].chunk_bytes, 0u);  // not split unless the job says so
  EXPECT_EQ(s.jobs[1].chunk_bytes, 128u << 10);
  EXPECT_NO_THROW(ValidateScenario(s, {}));
}

// Replaces the first occurrence of `from` in the good scenario and expects an error naming `key`.
void ExpectError(const std::string& from, const std::string& to, const std::string& key) {
  std::string text = kGood;
  const auto pos = text.find(from);
  ASSERT_NE(pos, std::string::npos) << from;
  text.replace(pos, from.size(), to);
  try {
    const Scenario s = ParseScenario(text, "test.yaml");
    ValidateScenario(s, {});
    FAIL() << "no error for " << to;
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos)
        << "message '" << e.what() << "' does not name " << key;
  }
}

TEST(Scenario, ErrorsNameTheKey) {
  ExpectError("gpus: 16", "gpus: -2", "jobs[0].gpus");
  ExpectError("gpus: 16", "gpus: many", "jobs[0].gpus");
  ExpectError("iterations: 20", "iterations: 0", "jobs[0].iterations");
  ExpectError("priority: high", "priority: urgent", "jobs[0].priority");
  ExpectError("uplink_gbps: 100", "uplink_gbps: 0", "topology.racks[0].uplink_gbps");
  ExpectError("nic_gbps: 50", "nic_gbps: x", "topology.racks[0].nodes[1].nic_gbps");
  ExpectError("compute_jitter: 0.02", "compute_jiter: 0.02", "noise.compute_jiter");
  ExpectError("compute_jitter: 0.02", "slow_phase_p: 1.5", "noise.slow_phase_p");
  ExpectError("compute_jitter: 0.02", "slow_phase_factor: 0.5", "noise.slow_phase_factor");
  ExpectError("arrival_s: 1.5", "arrival_s: -1", "jobs[0].arrival_s");
  ExpectError("nodes: [n1, n2]", "nodes: [n1, n9]", "jobs[0].nodes[1]");
  ExpectError("nodes: [n1, n2]", "nodes: [n1]", "jobs[0].nodes");
  ExpectError("name: j2", "name: j1", "jobs[1].name");
  ExpectError("{name: n2,", "{name: n1,", "topology.racks[0].nodes[1].name");
  ExpectError("gpus: 2, iterations: 5", "gpus: 99, iterations: 5", "jobs[1].gpus");
  ExpectError("    compute_ms: 100\n", "", "jobs[0]");
  ExpectError("seed: 3", "seed: [3]", "seed");
  ExpectError("chunk_kib: 128", "chunk_kib: 32", "jobs[1].chunk_kib");  // below the shim's 64
  ExpectError("chunk_kib: 128", "chunk_kib: 0", "jobs[1].chunk_kib");
  ExpectError("jobs:", "jobz:", "jobz");
}

TEST(Scenario, MissingSectionsAndBrokenYaml) {
  EXPECT_THROW(ParseScenario(""), ScenarioError);
  EXPECT_THROW(ParseScenario("seed: 1\njobs: []\n"), ScenarioError);
  EXPECT_THROW(ParseScenario("topology: {racks: [\n"), ScenarioError);
  try {
    (void)ParseScenario("seed: 1\n", "x.yaml");
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("topology"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.yaml"), std::string::npos) << e.what();
  }
}

TEST(Scenario, ModelKeyNeedsTheTableOrExplicitFigures) {
  std::string text = kGood;
  text.replace(text.find("compute_ms: 100\n    gradient_mb: 50"),
               std::string("compute_ms: 100\n    gradient_mb: 50").size(), "model: resnet50");
  const Scenario s = ParseScenario(text);
  EXPECT_EQ(s.jobs[0].model, "resnet50");
  const ModelLookup table = [](const std::string& model, const std::string& gpu) {
    if (model != "resnet50") throw std::out_of_range("unknown model " + model);
    if (gpu != "A100" && gpu != "V100") throw std::out_of_range("unknown GPU " + gpu);
    return ModelFigures{100.0, 102.4};
  };
  EXPECT_NO_THROW(ValidateScenario(s, table));
  Scenario bad = s;
  bad.jobs[0].model = "resnet51";
  try {
    ValidateScenario(bad, table);
    FAIL();
  } catch (const ScenarioError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("jobs[0].model"), std::string::npos) << what;
    EXPECT_NE(what.find("resnet51"), std::string::npos) << what;
    EXPECT_EQ(what.find("resnet51"), what.rfind("resnet51")) << "named twice: " << what;
  }
  Scenario bad_gpu = s;
  bad_gpu.racks[0].nodes[0].gpu = "H900";
  try {
    ValidateScenario(bad_gpu, table);
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("nodes[0].gpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace metronome::sim
