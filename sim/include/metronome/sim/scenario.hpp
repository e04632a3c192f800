// A simulation scenario: the cluster, the jobs and the noise, as read from a YAML file
// (examples/scenarios/*.yaml; the format is documented in docs/simulator.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace metronome::sim {

// A scenario the simulator cannot use. what() names the offending key, e.g.
// "jobs[3].gpus: must be a positive integer (got -2)".
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Noise {
  double compute_jitter = 0.0;  // relative standard deviation of each iteration's compute time
  double clock_skew_us = 0.0;   // each node's clock is off by U(-skew, +skew)
  double profile_error = 0.0;   // the planner's profile of a job is off by U(-e, +e) (relative)
  double start_jitter_s = 0.0;  // a started job's first iteration begins after U(0, x) seconds
                                // (process launch, rendezvous); counted in its JCT
  // Transport hiccups: each communication phase, with probability slow_phase_p, moves
  // U(1, slow_phase_factor) times its bytes (a phase on the CPU testbed's TCP sometimes needs up
  // to twice its wire time, its two directions taking turns; see docs/testbed.md).
  double slow_phase_p = 0.0;
  double slow_phase_factor = 1.0;
};

struct NodeSpec {
  std::string name;
  int gpus = 0;
  std::string gpu;  // GPU type key (A100, V100, T4, RTX3090, ...)
  double nic_gbps = 0.0;
};

struct RackSpec {
  std::string name;
  double uplink_gbps = 0.0;
  std::vector<NodeSpec> nodes;
};

// Priorities: high = 3, normal = 1, low = 0, or any integer (higher = more important).
inline constexpr int kPriorityHigh = 3;
inline constexpr int kPriorityNormal = 1;
inline constexpr int kPriorityLow = 0;
// The class a priority falls in, for reports: "high" (≥ 3), "normal" (1–2), "low" (≤ 0).
std::string PriorityClass(int priority);
// The traffic class of a priority class on a fabric that honours them: high 2, normal 1, low 0.
int TrafficClass(int priority);

struct JobSpec {
  std::string name;
  std::string model;  // empty when compute_ms / gradient_mb are given
  // Per-iteration compute time per GPU type (from the model table) or one value for all types.
  double compute_ms = 0.0;   // explicit value (0: use the model table)
  double gradient_mb = 0.0;  // S, the gradient size in MB (10^6 bytes)
  int gpus = 0;              // total ranks
  int gpus_per_pod = 1;      // placement granularity
  int iterations = 0;
  int priority = kPriorityNormal;
  double arrival_s = 0.0;
  std::vector<std::string> nodes;        // pinned placement (empty: the policy places the job)
  std::optional<double> compute_jitter;  // overrides noise.compute_jitter for this job
  std::string gpu;  // node selector: place only on nodes with this GPU type (empty: any)
  // The shim's METRONOME_CHUNK_KIB for the job's ranks, in bytes (0: collectives are not split).
  std::uint64_t chunk_bytes = 0;
};

struct Scenario {
  std::uint64_t seed = 1;
  Noise noise;
  double intra_node_gbps = 2400.0;  // bandwidth of the all-reduce among GPUs of one node
  std::vector<RackSpec> racks;
  std::vector<JobSpec> jobs;
};

// Resolves a model key and GPU type to (compute_ms, gradient_mb). Throws ScenarioError (or
// std::out_of_range with a readable message) for unknown keys.
struct ModelFigures {
  double compute_ms = 0.0;
  double gradient_mb = 0.0;
};
using ModelLookup = std::function<ModelFigures(const std::string& model, const std::string& gpu)>;

// The model table linked into this build, or an empty function when there is none.
ModelLookup DefaultModelLookup();

// Parses a scenario from YAML text / a file. `source` names it in error messages.
Scenario ParseScenario(const std::string& yaml_text, const std::string& source = "<scenario>");
Scenario LoadScenario(const std::string& path);

// Checks the semantic rules that cross keys (unique names, pinned nodes exist, a job fits the
// cluster, model keys resolve). Throws ScenarioError naming the key.
void ValidateScenario(const Scenario& scenario, const ModelLookup& models);

}  // namespace metronome::sim
