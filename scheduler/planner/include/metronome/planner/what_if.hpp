// What-if scoring (the extender's prioritize verb, docs/kubernetes.md): "if this job's pods were
// placed on these nodes, how much slower would it and the jobs on the links it would cross run?"
//
// Each candidate is evaluated incrementally against the planner's current plan, which stays
// as it is (running jobs are not moved, as stage 2 prefers): the job is admitted like a new job
// (stages 1–2: the smallest candidate period within the stretch bound with a free offset on
// every link the candidate crosses). If it fits, nobody else slows down; if it does not, it
// would run best-effort, drifting ungated at its natural period, and its expected overlaps
// with the windows there give its own and its neighbours' predicted slowdowns (overlapping
// time × excess height / B).
// Insertion only: a placement that fits only after OnlinePlanner::add_job repacks the
// neighbours is scored, pessimistically, as best-effort.
#pragma once

#include <span>
#include <vector>

#include "metronome/planner/model.hpp"
#include "metronome/planner/planner.hpp"

namespace metronome::planner {

struct AffectedJob {
  JobId id = 0;
  double slowdown_before = 0.0;
  double slowdown_after = 0.0;
};

struct WhatIfResult {
  bool gated = false;                  // the job would get a contention-free window
  Nanos period_ns = 0;                 // its harmonic period if gated
  double job_slowdown = 0.0;           // predicted (iteration time − P)/P of the job
  double neighbour_slowdown = 0.0;     // Σ π·(after − before) over the jobs on its links
  bool hurts_higher_priority = false;  // would contend with a gated job of higher priority
  std::vector<AffectedJob> affected;   // filled only with WhatIfOptions::list_affected
};

struct WhatIfOptions {
  bool list_affected = false;
};

// One result per candidate node set. The job's own `nodes` are ignored: each candidate gives
// them (e.g. the nodes its other pods already hold plus one candidate node).
[[nodiscard]] std::vector<WhatIfResult> WhatIf(const OnlinePlanner& planner, const Job& job,
                                               std::span<const std::vector<NodeId>> candidates,
                                               const WhatIfOptions& options = {});

}  // namespace metronome::planner
