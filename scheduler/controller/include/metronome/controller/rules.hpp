// The controller's rules (docs/scheduler.md, "The controller's rules"), as pure functions over a
// job's state so that each rule can be tested alone. The scheduler service calls them on every
// profile report and logs and counts every decision they return; the simulator's Metronome calls
// them on its simulated shims' reports.
//
//   1. Lateness. Each reported phase start (scheduler clock) is compared with the job's windows:
//      lateness = start − the nearest window opening. A phase later than the late slack has
//      drifted past its cushion: the shim's gate holds it to the next window (stop-and-wait);
//      the controller counts it. A report is "late" when at least `late_fraction` of its new
//      phases were (judged only on a report that brings new phases: the job's other ranks
//      report the same ones); `late_reports` late reports in a row trigger a re-plan of the job
//      (its measured profile replaces the planned one), at most once per `replan_cooldown_ms`.
//   2. Profile change. A period or communication time that differs from the planned one by more
//      than `profile_change_threshold` (relative) in `profile_change_reports` reports in a row
//      triggers a re-plan with the new profile.
//   3. Stale timetable. A rank that reports an older timetable version than the current one is
//      sent the timetable again.
//   4. Overrun. A gated job whose median phase (as the shim measures it) is longer than its
//      window by more than `overrun_ratio` in `profile_change_reports` reports in a row is
//      re-planned with that phase as its least window (JobState::phase_floor_ns): traffic the
//      plan does not control (drifting best-effort jobs) slows its phases, and a window shorter
//      than they are makes it later every period, so that it waits at its gate for a window it
//      cannot keep. Once its phases are shorter than that floor by `overrun_ratio` squared (a
//      band against flapping), it follows them down.
//      Judged only on phases run under the current timetable (16 of them, twice the shim's
//      median window). A widening that would stretch the job's period (it no longer fits at
//      its harmonic) is not taken by the planning round (PlanningAdapter::WidenWindow,
//      decision `overrun_refused`); the rule then waits for phases longer than the refused
//      window by `overrun_ratio`, or for a new timetable (JobState::overrun_refused_ns).
//      A widening is also deferred while a job of higher priority on the job's links runs past
//      its own window and cushion (SpillsPastCushion): then that job's phases are what runs
//      into this window, a wider window here cannot fit them, and it is that job's overrun that
//      the rule widens (JobState::overrun_deferred_to). It waits at most twice
//      `profile_change_reports` intervals of the job.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "metronome/common/protocol.hpp"
#include "metronome/controller/config.hpp"
#include "metronome/controller/job_state.hpp"
#include "metronome/controller/planning.hpp"

namespace metronome::controller {

enum class Decision : uint8_t {
  kNone,
  kReplanLateness,  // persistent lateness
  kReplanProfile,   // changed profile
  kReplanOverrun,   // gated phases longer than their window
};

struct ReportVerdict {
  Decision decision = Decision::kNone;
  uint32_t new_phases = 0;
  uint32_t late_phases = 0;  // new phases past the late slack (held by the shim)
  uint64_t realigned = 0;    // late phases the shim held to their next window since its last report
  uint64_t yielded = 0;      // collectives it held for higher-ranked windows since then
  int64_t yield_wait_ns = 0;  // ... and how long they waited
  bool repush = false;        // the rank runs an older timetable version
  // The overrun rule would widen the window, but this higher-priority neighbour's phases run
  // past its own window and cushion (empty: not deferred).
  std::string overrun_deferred_to;
  bool first_profile = false;  // the job can be planned now
  std::string reason;          // one line for the log
};

// Signed lateness of a phase start relative to the nearest window opening, in (−P/2, P/2].
int64_t SignedLateness(const Timetable& tt, int64_t start_ns);

// When the job's first phase after `after_ns` (scheduler clock) should start: for a gated job its
// next window; for an ungated one that runs at a steady pace (its last four gaps between phase
// starts within 2 % of their median) the last start plus whole periods of that pace, plus half
// the gaps' spread. 0 when unknown (too few phases, an unsteady pace). The planner opens a new
// job's first window there.
int64_t PredictNextPhase(const JobState& job, int64_t after_ns);

// Whether a gated job's phases, as late as they start (its lateness average) and as long as they
// last (its latest median), run past its window and its cushion: into what follows on its links.
[[nodiscard]] bool SpillsPastCushion(const JobState& job);
// Whether `other` has a higher priority than `job` and crosses one of its links.
[[nodiscard]] bool OutranksOnSharedLink(const JobState& other, const JobState& job);

// The jobs for which OutranksOnSharedLink(other, job) holds. The overrun rule asks only when it
// would widen a window, so a caller may scan all its jobs.
using OutrankingNeighbours = std::function<std::vector<const JobState*>(const JobState& job)>;

// Applies one profile report from `rank` to `job` (measured phases, profile, controller counters)
// and returns what the caller (the service, the simulator) should do. `now_ns` is the scheduler
// clock at receipt. Without `outranking` no widening is deferred.
ReportVerdict ApplyReport(JobState& job, RankState& rank, const proto::ProfileReport& report,
                          const ControllerConfig& controller, const PlanningConfig& planning,
                          int64_t now_ns, const OutrankingNeighbours& outranking = {});

const char* DecisionName(Decision d);

// The job as the planner is given it: its measured profile, its ranks' nodes, and where its next
// phase should start if it is placed at `now_ns` (PredictNextPhase, a little ahead of now for
// the plan and the push).
PlanJob ToPlanJob(const JobState& job, int64_t now_ns);

// After a plan placed the job as `planned` describes it: the profile the controller compares
// later reports with (rule 2) and the floor it was planned with (rule 4).
void RecordPlanned(JobState& job, const PlanJob& planned);
// After a widening the planner did not take (PlanningAdapter::WidenWindow): the rule waits for
// longer phases, and the floor goes back to what the plan has.
void RecordWidenRefused(JobState& job, const PlanJob& refused);

// What the planner's schedule for the job becomes at the shims: the late slack scaled and the
// max wait capped by `config`, validated. Returns true when that is a new timetable (its version
// bumped, the controller's per-timetable state reset); false when it is the one in force or is
// unusable (then `check` has ValidateTimetable's verdict with reject bits).
bool AdoptSchedule(JobState& job, const JobSchedule& schedule, const TimetableConfig& config,
                   uint32_t& check);

}  // namespace metronome::controller
