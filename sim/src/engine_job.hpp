// The simulator engine's per-job state and per-link totals, and the figures of a run made from
// them (results.cpp). Private to the simulator: simulator.cpp drives the state, results.cpp
// only reads it.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/common/yield.hpp"
#include "metronome/sim/cluster.hpp"
#include "metronome/sim/placement.hpp"
#include "metronome/sim/scenario.hpp"
#include "metronome/sim/simulator.hpp"
#include "metronome/sim/time_scheduler.hpp"

namespace metronome::sim::engine {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// kYield: a phase paused between two of its collectives for a higher-ranked window
// (DecideYield).
enum class State { kPending, kQueued, kLaunch, kCompute, kGate, kComm, kYield, kLocalComm, kDone };

// What one all-reduce call of a simulated phase carries: PyTorch DDP's default gradient bucket
// (bucket_cap_mb = 25). A phase of V gradient bytes is ceil(V / this) collectives, and only a
// job that yields pauses between them.
inline constexpr double kBucketBytes = 25.0 * 1024 * 1024;

struct Job {
  const JobSpec* spec = nullptr;
  std::size_t index = 0;
  State state = State::kPending;
  Placement placement;
  std::vector<std::uint32_t> nodes;
  std::vector<std::uint32_t> links;
  double compute_s = 0.0;  // mean compute per iteration on its placement
  double volume = 0.0;     // bytes per link per iteration
  double bottleneck_bytes_per_s = 0.0;
  double natural_s = 0.0;
  std::mt19937_64 rng;
  std::normal_distribution<double> jitter{0.0, 1.0};
  std::mt19937_64 slow_rng;  // its own stream: other noise draws stay as they were
  double profile_factor = 1.0;
  double start_delay = 0.0;  // launch delay before the first iteration

  // Dynamic state.
  double phase_end = kInf;  // compute end, gate release, or local comm end
  double remaining = 0.0;   // bytes left in the current transfer, as of rate_t
  double rate = 0.0;
  double rate_t = 0.0;
  std::uint64_t event_seq = 0;  // its entry in the engine's event queue
  // A yielding job's phase in collectives: bytes per collective (0: one flow, no pauses), the
  // bytes of this phase, and `remaining` at the end of the current collective.
  double collective_bytes = 0.0;
  double phase_bytes = 0.0;
  double stop_at = 0.0;
  double pause_s = 0.0;           // time this phase paused between its collectives
  double collective_start = 0.0;  // when the collective now on the wire started
  WirePace pace;                  // the shim's pace of its collectives (DecideYield's need)
  int iter = 0;
  double iter_start = 0.0;
  double compute_this = 0.0;
  double comm_start = 0.0;
  double gate_enter = 0.0;
  IterationObservation obs;

  // Results.
  double start_s = 0.0;
  double finish_s = 0.0;
  double sum_iter = 0.0;
  double sum_comm = 0.0;
  double sum_gate = 0.0;
  std::uint64_t fail_opens = 0;
  std::uint64_t yields = 0;  // holds for higher-ranked windows, at phase starts and inside
  double sum_yield = 0.0;    // time they held
  GateMemory gate_memory;    // the gate's memory between phases (MustRealign)
  // Taking turns (common/turn.hpp): its last two phase begins and ends on the wire, latest first
  // (< 0: none), from which its partners see what was relayed to them; whether its gate holds
  // the phase for a partner's turn (since when), and how many phases in a row held.
  double begun[2] = {-1.0, -1.0};
  double ended[2] = {-1.0, -1.0};
  bool held_for_turn = false;
  double turn_hold_start = 0.0;
  std::uint32_t turns_in_a_row = 0;
  bool best_effort = false;
  Timetable last_tt;
  double sum_period = 0.0;
  std::uint64_t gated_phases = 0;

  [[nodiscard]] double CommEnd() const {
    if (rate <= 0) return kInf;
    return rate_t + (remaining - stop_at) / rate;
  }
};

// What each link carried over the run, by link index.
struct LinkTotals {
  std::vector<double> transfer_s;  // time with at least one transfer on it
  std::vector<double> overlap_s;   // time with two or more
  std::vector<double> bytes;
  std::vector<double> busy_s;  // time during which at least one running job crossed it
};

// The run's figures: per job, per link that carried traffic, and the summary (wall time,
// scheduler statistics and events are the caller's).
RunResult CollectResults(const std::string& policy, const std::vector<Job>& jobs,
                         const Cluster& cluster, const LinkTotals& totals);

}  // namespace metronome::sim::engine
