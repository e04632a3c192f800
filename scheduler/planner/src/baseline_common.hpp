// Internal: scoring a plan whose windows may overlap (the baselines), with the contention model.
#pragma once

#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner::detail {

// Fills plan.links and each job's predicted_slowdown and the score. Jobs with best_effort set
// are random sources; the others are gated windows (which may overlap). Score.utilization is
// the load actually carried, Σ w·h / (P·(1 + slowdown)·B), so baselines compare on the bytes
// they move; latency is Σ π·slowdown; cushion is left at 0.
void ScoreBaseline(const Problem& problem, Plan& plan);

}  // namespace metronome::planner::detail
