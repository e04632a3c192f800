// The planner's output: a period, an offset and a window per job, and what that means for each
// link. Every offset is relative to one common epoch (Plan::epoch_ns, in the scheduler's clock).
#pragma once

#include <cstdint>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/planner/model.hpp"

namespace metronome::planner {

struct JobPlan {
  JobId id = 0;
  // What the job's gate obeys: common/'s Timetable, the one schedule type from planner to gate,
  // with its offset from Plan::epoch_ns (epoch_ns and version stay 0: whoever pushes it sets
  // them; make_timetable below fills it).
  // Gated jobs: window k opens at epoch + offset + k·period and lasts window = c. The period is
  // harmonic with the other gated jobs on each of the job's links and never below P. The late
  // slack is the cushion: how late the job may start and still collide with none.
  // Best-effort: the job did not fit without contention. It is never starved: it runs ungated
  // at its natural period (window = period), yields to the windows ranked above it
  // (ranked_yields.hpp) and shares bandwidth with the rest. It has no cushion.
  // Not gated at all (nothing to take turns with, a best-effort job, or a job the planner
  // knows nothing about): window = period, the gate is always open.
  Timetable timetable;
  bool best_effort = false;
  double predicted_slowdown = 0.0;  // (iteration time − P) / P expected under this plan
};

struct LinkPlan {
  LinkId link = 0;
  Nanos hyperperiod_ns = 0;  // lcm of its gated jobs' periods (0: none, or beyond ~2.8 h)
  double served_load = 0.0;  // Σ over gated jobs of w·h / (T·B): contention-free share
  Nanos min_cushion_ns = 0;  // smallest gap after a gated window before another one (−1: n/a)
  double contention = 0.0;   // expected E[max(0, load − B)] / B over time
  std::uint32_t gated_jobs = 0;
  std::uint32_t best_effort_jobs = 0;
};

// The three objectives, compared lexicographically (better() below).
struct Score {
  // Stage 1: the contention-free served load (Σ over links of w·h/(T·B) of gated jobs) of each
  // priority class, highest priority first; compared class by class, so that serving more of
  // a lower class never excuses serving less of a higher one ("best-effort lowest first").
  std::vector<std::pair<int, double>> served_by_priority;
  double utilization = 0.0;  // stage 1 summary: the same summed over classes (higher is better)
  double latency = 0.0;      // stage 2: Σ π·(T−P)/P + moves + best-effort penalty (lower)
  double cushion_ns = 0.0;   // stage 3: min over gated jobs of late_slack / π (higher)
};

struct Plan {
  Nanos epoch_ns = 0;         // the caller's (the daemon picks the common epoch); planners leave 0
  std::vector<JobPlan> jobs;  // one per job, in the problem's job order
  std::vector<LinkPlan> links;  // one per link of the topology, by link id
  Score score;

  [[nodiscard]] const JobPlan* Find(JobId id) const;
};

// A plan entry's timetable: window k opens at offset + k·period (from the plan's epoch) and
// lasts `window`. The longest a gate may hold a phase is period − window: a phase that comes
// later than its slack but before its window would have ended goes at once (the gate's fail-open)
// instead of waiting nearly a whole period for the next window; one that comes after the
// window's end waits for the next window, at most period − window. A gated job's late slack is
// its cushion. window = period: the gate is always open (AlwaysOpen), max wait 0; so run
// best-effort jobs and jobs with nothing to take turns with.
[[nodiscard]] Timetable MakeTimetable(Nanos period_ns, Nanos offset_ns, Nanos window_ns,
                                      Nanos cushion_ns);

// Whether re-planning a gated job with a wider window (the controller's overrun rule) left it
// gated at a period longer than before by more than twice the widening: the wider window no
// longer fits at its harmonic and the planner took a longer one (twice the period, on the CPU
// testbed). Such a widening is not worth taking. One that leaves the job best-effort, or that
// comes to a job that was not gated, is.
[[nodiscard]] bool WideningStretches(const JobPlan& before, const JobPlan& after);

struct PlannerOptions {
  double max_stretch = 2.0;          // a gated job's period is at most max_stretch·P
  int cushion_sweeps = 2;            // stage-3 relaxation passes
  double move_cost_weight = 1.0;     // stage-2 cost of moving a running job: weight·π·delay/P
  double min_move_gain = 0.01;       // a running job moves only if stage 2 gains more than this
  double best_effort_penalty = 1.0;  // stage-2 cost of a best-effort job, in units of π
  // Stretch or run ungated? The harm ungated traffic would do to a higher-priority job's
  // windows counts this many times over (stage 2; see stage2_latency.cpp).
  double higher_priority_protection = 2.0;
  // A lower-ranked phase that would end a little into a higher-ranked window finishes instead of
  // pausing for the whole window (YieldSet::allowance_ns): the jobs ranked below a window may
  // together end this share of its length past its opening (ranked_yields.hpp).
  double yield_allowance = 0.2;
  // Jitter (docs/planner.md, stage 3: the cushion absorbs jitter and drift). Every gated window
  // is followed by a gap of at least max(min_cushion_ns, jitter_cushion·σ) before another job's
  // window, σ = the job's JobProfile::jitter_ns: windows are never packed tighter than the
  // clocks (min_cushion_ns: clock error between nodes, gate release error) and the compute
  // jitter allow. Stage 3 spreads what is left on top. A window whose period exceeds the
  // job's natural period by at least that gap keeps max(min_cushion_ns, σ): the job waits at
  // its gate every iteration, so its phases start at the window opening (docs/planner.md).
  Nanos min_cushion_ns = 0;
  double jitter_cushion = 3.0;
  // Stop-and-wait needs a period a little longer than the mean iteration: at T = P a phase that
  // comes late is never caught up (the lateness is a random walk) and sooner or later misses
  // its slack and waits. A gated job's period is at least P + jitter_headroom·σ (not bounded by
  // max_stretch: it is not a harmonic stretch), so that lateness drifts back to zero. The
  // headroom is rounded up to a whole percent of P, which keeps equal and harmonic natural
  // periods equal and harmonic (rounding P + headroom to a fixed grid would not: 123 : 246 ms).
  double jitter_headroom = 1.0;
  // The cushion switch (the no-cushion ablation): false packs windows against each other (no
  // minimum cushion), runs no stage 3 (also not in the offline search) and gives every job
  // zero late slack.
  bool cushion = true;
  // Lexicographic tolerances: a difference below these is a tie at that stage.
  double utilization_tolerance = 1e-9;
  double latency_tolerance = 1e-9;
  double cushion_tolerance_ns = 0.5;
};

// True when a beats b lexicographically (stage 1 class by class from the highest priority,
// then 2, then 3, each within its tolerance).
[[nodiscard]] bool Better(const Score& a, const Score& b, const PlannerOptions& options);

}  // namespace metronome::planner
