// Offline recalculation (docs/planner.md): a slower search for a better plan, run by the daemon
// in the background when the online result is poor (contention left, cyclic job–link graphs,
// many jobs).
//
// Method: randomized restarts of the greedy method (random order within each priority class,
// random free range and point within it, now and then a longer period, running jobs sometimes
// forced to move) and ruin-and-recreate local search around the best plan found (clear every
// job on one link and re-place them). Every candidate is scored by the same three stages,
// with moves counted against `current`, so a plan that only shuffles running jobs loses.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>

#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner {

struct OfflineOptions {
  PlannerOptions planner;
  std::chrono::nanoseconds budget = std::chrono::milliseconds(200);
  std::uint64_t seed = 1;
  std::uint64_t max_iterations = 0;  // 0: until the budget is spent or a stop is requested
};

struct OfflineStats {
  std::uint64_t iterations = 0;
  std::uint64_t improvements = 0;
  Score current;  // the score of the plan passed in
  Score best;     // the best score found (equal to current when nothing beat it)
};

// Returns a plan only when it beats `current` lexicographically (Better() in plan.hpp) by more
// than PlannerOptions::min_move_gain in stage 1 or 2 (a tie there leaves stage 3 to decide).
// Stops at the budget, at max_iterations, or as soon as `stop` is requested. Throws
// std::invalid_argument on invalid jobs (validate() in model.hpp).
[[nodiscard]] std::optional<Plan> Recalculate(const Problem& problem, const Plan& current,
                                              const OfflineOptions& options,
                                              std::stop_token stop = {},
                                              OfflineStats* stats = nullptr);

}  // namespace metronome::planner
