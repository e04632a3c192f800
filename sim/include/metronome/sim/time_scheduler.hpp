// The simulator's view of time scheduling: who decides the timetables the gates obey.
//
// Two implementations: Metronome runs the scheduler service's controller and planning path
// (controlled_scheduler.cpp), the CASSINI baseline the planner's plan_cassini
// (cassini_scheduler.cpp). This interface keeps the fluid engine independent of both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"
#include "metronome/sim/cluster.hpp"
#include "metronome/sim/flow_network.hpp"

namespace metronome::sim {

// A job that just started running, as the scheduler learns it (from the shim's profile report).
struct ActiveJob {
  std::size_t index = 0;  // the job's index in the scenario
  int priority = 0;
  std::vector<std::uint32_t> nodes;       // distinct nodes of its ranks
  std::vector<std::uint32_t> rank_nodes;  // each rank's node (one per GPU)
  std::vector<std::uint32_t> links;       // links its all-reduce crosses (may be empty)
  std::int64_t compute_ns = 0;      // profiled compute phase (may be off by the profile error)
  std::int64_t jitter_ns = 0;       // its standard deviation from iteration to iteration
  std::int64_t comm_ns = 0;         // communication phase alone, at bandwidth beta
  double beta_bytes_per_s = 0.0;    // the bottleneck capacity along its links
  double volume_bytes = 0.0;        // V per link per iteration
  double gradient_bytes = 0.0;      // what each all-reduce call moves (the shim's bytes)
  std::int64_t start_delay_ns = 0;  // launch delay before its first iteration
};

// What the controller observes after each iteration of a job (the shim's phase tracker).
struct IterationObservation {
  std::int64_t compute_ns = 0;   // measured compute phase
  std::int64_t lateness_ns = 0;  // gate arrival after its window opened (DecideGate)
  bool waited = false;           // the gate held the phase
  bool failed_open = false;      // the gate gave up waiting (max_wait)
  bool late = false;             // the shim counts it late (CountsLate)
  bool realigned = false;        // held to its next window beyond max_wait (MustRealign)
  bool yielded = false;          // held for higher-ranked windows (DecideRankedGate)
  std::int64_t hold_ns = 0;      // how long the gate held it at the phase start
  std::int64_t pause_ns = 0;     // how long yields held its further collectives
  std::int64_t comm_ns = 0;      // measured communication phase (its start to its end)
};

struct SchedulerStats {
  std::uint64_t plans = 0;  // full plans computed
  std::uint64_t adds = 0;   // incremental additions
  std::uint64_t removes = 0;
  std::uint64_t controller_replans = 0;  // re-plans the controller decided (ApplyReport)
  std::uint64_t overrun_replans = 0;     // ... of which for phases longer than their window
  std::uint64_t overrun_refused = 0;     // widenings not taken: they stretched the period
  std::uint64_t overrun_deferred = 0;    // reports whose widening waited for a spilling higher job
  std::uint64_t offline_runs = 0;        // offline recalculations run
  std::uint64_t offline_adopted = 0;     // ... whose plan beat the current one
  std::uint64_t placements_scored = 0;   // jobs placed by what-if scoring
  std::uint64_t placements_refused = 0;  // candidates the planner refused to score
  double planner_seconds = 0.0;          // wall time spent in the planner
};

enum class SchedulingKind { kNone, kCassini, kMetronome };

struct PolicyConfig {
  std::string name;
  int placement = 0;  // PlacementKind
  SchedulingKind scheduling = SchedulingKind::kNone;
  bool cushion = true;          // planner stage 3
  bool stretch = true;          // harmonic period stretching
  bool controller = true;       // re-planning on departures and drift
  bool overrun = true;          // the controller widens windows that phases overrun
  double max_stretch = 0.0;     // planner's max_stretch (0: the planner's default)
  bool yields = true;           // false: no job yields (the ablation)
  int offline_iterations = 40;  // offline search iterations per run (scaled down above 50 jobs)
  // How links share among transfers. kByClass: each job's traffic carries the class of its
  // priority (the shim's METRONOME_TRAFFIC_CLASS), served by strict priority.
  Sharing sharing = Sharing::kMaxMin;
  // The jobs of a link that two jobs share take turns (common/turn.hpp), each told of the
  // other's phase edges this many milliseconds late; < 0: they do not.
  double turn_relay_ms = -1.0;
};

// How late the Metronome policies relay phase edges: the shim's 1 ms poll and the service's
// relay within it (decision 0029 measured pairs losing again from about 5 ms).
inline constexpr double kDefaultTurnRelayMs = 2.0;

class TimeScheduler {
 public:
  virtual ~TimeScheduler() = default;
  virtual void JobStarted(const ActiveJob& job, std::int64_t now_ns) = 0;
  virtual void JobFinished(std::size_t index, std::int64_t now_ns) = 0;
  virtual void IterationDone(std::size_t index, const IterationObservation& obs,
                             std::int64_t now_ns) = 0;
  // The timetable the job's gate uses for the phase that starts now; nullptr = ungated (the
  // phase starts at once). Called once per communication phase.
  [[nodiscard]] virtual const Timetable* GateTimetable(std::size_t index) = 0;
  // The higher-ranked windows its gate yields to, with that timetable (nullptr: none).
  [[nodiscard]] virtual const YieldSet* GateYields(std::size_t /*index*/) const { return nullptr; }
  // A count that moves whenever GateYields may answer differently for some job (a plan applied,
  // a shim that starts or stops gating): a phase in flight then takes the new sets at its next
  // collective, as the shim's parts do.
  [[nodiscard]] virtual std::uint64_t YieldsVersion() const { return 0; }
  // The partners the job's gate takes turns with, their edges not filled in (nullptr: none).
  [[nodiscard]] virtual const TurnSet* GateTurns(std::size_t /*index*/) { return nullptr; }
  // The job's current timetable, for reports (nullptr: none).
  [[nodiscard]] virtual const Timetable* CurrentTimetable(std::size_t index) const = 0;
  // Whether the plan marks the job best-effort (ungated, shares bandwidth).
  [[nodiscard]] virtual bool BestEffort(std::size_t index) const = 0;
  [[nodiscard]] virtual SchedulerStats Stats() const = 0;
  // Placement scoring: the cost (lower is better) of starting the job as each candidate
  // describes it (nodes, links, profile). Used by the scored placement of the metronome policies.
  [[nodiscard]] virtual std::vector<double> ScorePlacements(
      const std::vector<ActiveJob>& candidates) = 0;
};

// The scheduler a policy uses (Metronome's or CASSINI's); nullptr for policies without time
// scheduling.
std::unique_ptr<TimeScheduler> MakeTimeScheduler(const PolicyConfig& policy, const Cluster& cluster,
                                                 std::size_t job_count);

}  // namespace metronome::sim
