// The controller's settings: the topology it plans on, how shims report, how profiles become
// plans and plans timetables, and the controller's rules. Plain values with their embedded
// defaults; the scheduler service loads them from its YAML configuration
// (metronome/service/config.hpp, keys in docs/scheduler.md) and the simulator runs on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metronome/controller/overrun.hpp"

namespace metronome::controller {

// The network as written in a topology file, in the simulator's and the testbed's scenario format
// (`topology: {racks: [{name, uplink_gbps, nodes: [{name, nic_gbps}]}]}`, rates also as *_mbps),
// plus explicit links and a generated two-tier tree. Rates are bits/s in files, bytes/s here.
struct TopologyConfig {
  struct LinkSpec {
    std::string name;
    double capacity_bytes_per_s = 0.0;
  };
  struct NodeSpec {
    std::string name;
    double nic_bytes_per_s = 0.0;  // its uplink "<node>/up"; 0 = no uplink
  };
  struct RackSpec {
    std::string name;
    double uplink_bytes_per_s = 0.0;  // its uplink "<rack>/up"; 0 = none
    std::vector<NodeSpec> nodes;
  };
  struct TwoTier {
    uint32_t racks = 0;
    uint32_t nodes_per_rack = 0;
    double nic_bytes_per_s = 0.0;
    double uplink_bytes_per_s = 0.0;
  };
  std::optional<TwoTier> two_tier;  // racks r<r>, nodes r<r>n<k> (the planner's naming)
  std::vector<LinkSpec> links;      // explicit links (a spine, a shared bottleneck)
  std::vector<RackSpec> racks;
  // Nodes the topology does not name (a shim reports its node in the hello): a job with ranks
  // on two or more distinct nodes, some unknown, also crosses this link. Empty: no link.
  std::string unknown_nodes_link = "default";

  // The embedded default: one link "default" of 100 Gbit/s that every multi-node job crosses.
  static TopologyConfig Default();
};

struct RegistryConfig {
  int64_t rank_timeout_ms = 10'000;  // a rank silent this long is dropped; its job when none left
  uint32_t report_interval_ms = 1'000;  // told to shims in Welcome
  uint32_t max_clients = 100'000;       // hellos beyond this are rejected
  // (job, rank) pairs one peer may speak for (a process: its ranks, or with node sharing its
  // node's); hellos beyond it are rejected, so that one peer cannot grow the registry at will.
  uint32_t max_ranks_per_client = 1'024;
};

struct PlanningConfig {
  double min_confidence = 0.5;  // profiles below this confidence are not planned yet
  // Fastest phase at ≥ this × capacity: the job saturates the link. Low, because a job is first
  // measured ungated, sharing the link: with six jobs on it, a saturating one sees ~1/5, and a
  // high-priority job taken for a slow one is stacked beside the others instead of given its
  // window (0.3 did that on the load sweep's crowded links). Taking a slow job for a saturating
  // one costs less: its window is its wire time, and the overrun rule widens it.
  double saturate_fraction = 0.1;
  // Saturating jobs: window = wire time of their bytes × (1 + this), and the period is compute +
  // window. The margin must cover the transport's overhead, or the window is shorter than the
  // job's own phase and its period no longer than its iteration: on the CPU testbed a phase
  // alone takes 1.11 × the wire time, and at 0.1 the high-priority job ran late and lost whole
  // periods in half the runs (docs/decisions/0013). The most a window gets: a job whose median
  // phase shows less overhead gets that and 2 % (in 3 % steps; WireMargin, planner_job.cpp), and
  // copies of one model on shared links the least any of them shows (ShareMargin, planning.cpp).
  double wire_margin = 0.15;
  // Planned period ≥ measured natural period × (1 + this). 0: the planner already adds a
  // headroom of the jitter (rounded up to whole percents: 1 % for any measurable jitter), and a
  // late phase realigns to its next window rather than catching up.
  double period_margin = 0.0;
  int64_t epoch_ns = 0;      // the reference instant of all timetables (scheduler clock)
  double max_stretch = 4.0;  // planner: a gated period is at most max_stretch × P
  // Planner cushions: every gated window is followed by at least max(min_cushion, jitter_cushion ×
  // the job's σ) before another job's window. min_cushion covers what is not the job's own
  // jitter: clock error between nodes and the gate's release error.
  int64_t min_cushion_us = 2'000;
  double jitter_cushion = 3.0;
  bool cushion = true;  // planner stage 3: widen the cushions between windows (false: an ablation)
};

struct TimetableConfig {
  int64_t max_wait_ms = 10'000;   // cap on max_wait; a job's max_wait is min(period, cap)
  double late_slack_scale = 1.0;  // late_slack = scale × the planned cushion, in [0, 1]
};

struct ControllerConfig {
  int64_t tick_ms = 100;                  // how often timeouts and the controller run
  int64_t lateness_jitter_us = 1'000;     // phases within slack + this of the window are on time
  uint32_t late_reports = 5;              // consecutive late reports that trigger a re-plan
  double late_fraction = 0.5;             // a report is late when this share of its phases is
  double profile_change_threshold = 0.1;  // relative change of period or comm that counts
  uint32_t profile_change_reports = 3;    // consecutive changed reports before re-planning
  // Phases this much over a gated window widen it (0: off); the rule: controller/overrun.hpp.
  double overrun_ratio = kDefaultOverrunRatio;
  int64_t replan_cooldown_ms = 5'000;    // at most one controller re-plan per job this often
  int64_t offline_interval_ms = 10'000;  // background recalculation period (0: off)
  int64_t offline_budget_ms = 200;       // time budget of one background search
  uint32_t offline_max_moves = 8;        // a better plan moving more jobs than this is skipped
  // The two jobs of a link that only they cross, each of which alone fills it, take turns
  // (common/turn.hpp): the service tells each whom it takes turns with and relays their phase
  // edges between them (docs/decisions/0031).
  bool turns = true;
  // The service plans the cluster in this many parts, each with its own planner and lock, on
  // planning_threads threads, so that a long round in one part does not hold up the pushes of
  // another (jobs that share a link are always in one part). 1: one planner for the cluster.
  uint32_t planning_parts = 8;
  // Rounds of different parts that run at once. On the one core the scheduler is given, more
  // rounds at once only share it: each finishes later (docs/scheduler.md, "At cluster scale").
  uint32_t planning_threads = 2;
  uint32_t phase_history = 256;  // measured phase starts kept per job
};

}  // namespace metronome::controller
