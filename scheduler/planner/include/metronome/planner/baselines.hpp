// Baselines the simulator and the evaluation compare Metronome against, in the same Plan form.
//
// No time scheduling: what the cluster does today. Every job runs ungated at its natural
// period; the plan reports the contention each link sees and the slowdown each job should
// expect, modelling the jobs' phases as drifting independently.
//
// CASSINI-style (after NSDI'24, written from its description): per link, a "unified circle"
// whose perimeter is the least common multiple of the jobs' periods; each job is rotated on a
// grid to maximize the link's compatibility score 1 − mean over the circle of
// max(0, Σ demand − C)/C; an affinity graph (jobs and links, an edge per job–link pair) is
// traversed breadth-first to turn the per-link rotations into one time shift per job. No
// priorities, no period stretching: every job keeps T = P, and overlaps that remain are
// reported as contention.
#pragma once

#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner {

[[nodiscard]] Plan PlanWithoutTimeScheduling(const Problem& problem);

struct CassiniOptions {
  int rotations = 32;            // rotation grid per job on a circle
  int samples = 256;             // points of the circle where demand is evaluated
  Nanos max_circle_factor = 16;  // a perimeter above this × the longest period is not used;
                                 // the longest period serves as the circle instead
};

[[nodiscard]] Plan PlanCassini(const Problem& problem, const CassiniOptions& options = {});

}  // namespace metronome::planner
