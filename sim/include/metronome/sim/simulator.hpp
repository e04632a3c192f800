// metronome-sim's engine: a fluid, event-driven simulation of training jobs on a cluster.
//
// Each job, once placed, iterates: a compute phase (its compute time, with per-iteration jitter),
// then — for gated policies, when the shared gate code (DecideGate on the job's timetable, in each
// node's skewed clock) lets every rank go — a communication phase moving V = 2(n−1)/n · S bytes
// over every link it crosses. Concurrent transfers share links max-min fairly (max_min.hpp);
// rates are recomputed whenever a transfer starts or ends. Events: arrivals, compute ends, gate
// releases, transfer completions under the current rates. docs/simulator.md has the details.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "metronome/sim/cluster.hpp"
#include "metronome/sim/scenario.hpp"
#include "metronome/sim/time_scheduler.hpp"

namespace metronome::sim {

// Policies by name: k8s-default, network-aware, cassini, metronome, metronome-no-cushion,
// metronome-no-stretch, metronome-no-controller.
const std::vector<std::string>& PolicyNames();
// Throws std::invalid_argument for an unknown name.
PolicyConfig PolicyByName(const std::string& name);

struct JobResult {
  std::string name;
  std::string model;
  int priority = 0;
  int gpus = 0;
  int iterations = 0;
  int nodes_used = 0;
  int links_crossed = 0;
  std::vector<std::string> links;  // the names of the links it crossed (JSON with --links)
  double arrival_s = 0.0;
  double start_s = 0.0;  // placed and started
  double finish_s = 0.0;
  double jct_s = 0.0;  // finish − arrival (queueing included)
  double mean_iteration_ms = 0.0;
  double natural_ms = 0.0;    // natural period alone on its placement (mean compute + V/B)
  double slowdown = 0.0;      // mean_iteration / natural (1 = as fast as alone)
  double comm_ms = 0.0;       // mean communication phase
  double gate_wait_ms = 0.0;  // mean time held by the gate per iteration
  std::uint64_t fail_opens = 0;
  std::uint64_t yields = 0;     // holds for higher-ranked windows (phase starts and inside phases)
  double yield_wait_ms = 0.0;   // mean time they held per iteration
  bool best_effort = false;     // marked best-effort in the final plan it ran under
  double mean_period_ms = 0.0;  // mean timetable period over its gated phases (0: never gated)
  double gated_fraction = 0.0;  // share of its communication phases that went through a gate
  // The last timetable its gate used (all 0 when it ran ungated).
  double period_ms = 0.0;
  double window_ms = 0.0;
  double late_slack_ms = 0.0;
};

struct LinkResult {
  std::string name;
  double capacity_gbps = 0.0;
  double bytes = 0.0;
  double busy_s = 0.0;       // time during which at least one running job crossed it
  double utilization = 0.0;  // bytes / (capacity · busy_s)
  double overlap_s = 0.0;    // time during which two or more transfers shared it
};

struct Summary {
  double avg_jct_s = 0.0;
  double weighted_jct_s = 0.0;        // Σ π·JCT / Σ π, π = 1 + max(priority, 0)
  double avg_link_utilization = 0.0;  // mean over links that carried traffic
  double makespan_s = 0.0;
  double avg_slowdown = 0.0;
  // Σ over links of the time two or more transfers shared the link / Σ of the time any did.
  double overlap_fraction = 0.0;
  std::uint64_t events = 0;
  double wall_s = 0.0;  // simulator run time
};

struct RunResult {
  std::string policy;
  std::string scenario;
  std::vector<JobResult> jobs;
  std::vector<LinkResult> links;  // links that carried traffic
  Summary summary;
  SchedulerStats scheduler;
};

struct RunOptions {
  // Called now and then with the fraction of iterations done (0..1).
  std::function<void(double)> progress;
};

// Runs one policy on a (validated) scenario. Throws std::runtime_error when the scenario cannot
// run (a job can never be placed) or the policy is unavailable in this build.
RunResult Simulate(const Scenario& scenario, const PolicyConfig& policy,
                   const RunOptions& options = {});

}  // namespace metronome::sim
