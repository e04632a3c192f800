// metronome-sim's outputs: one JSON object per run, a readable table, and the side-by-side
// comparison of several policies on one scenario.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "metronome/sim/simulator.hpp"

namespace metronome::sim {

// {policy, scenario, jobs: [{name, jct_s, mean_iteration_ms, slowdown, ...}], summary: {avg_jct_s,
//  weighted_jct_s, avg_link_utilization, makespan_s, ...}, by_priority: {...}, scheduler: {...},
//  links: [...] (with_links)}
nlohmann::json ToJson(const RunResult& run, bool with_links = false);

// {scenario, baseline, runs: [ToJson...], ratios: {policy: {avg_jct_s: x, ...}}}
nlohmann::json CompareJson(const std::vector<RunResult>& runs, bool with_links = false);

void PrintTable(std::ostream& out, const RunResult& run);
// Side by side, with each metric's ratio to the first policy.
void PrintCompare(std::ostream& out, const std::vector<RunResult>& runs);

}  // namespace metronome::sim
