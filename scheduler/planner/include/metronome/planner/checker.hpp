// An independent feasibility checker: it shares no code with the planner beyond the model
// types, and checks any Plan (the planner's, the baselines', a hand-written one).
//
// For each link it draws every gated job's windows over the least common multiple of their
// periods (harmonic or not) and sweeps the load; when that multiple is too long to sweep it
// samples the circle instead. For each pair of gated jobs that cannot stack (h_i + h_j > B) it
// also checks exactly, with the gcd of their periods, that their windows never meet and that
// each job's late slack really is free: delaying the job by its late slack hits nobody.
#pragma once

#include <string>
#include <vector>

#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner {

struct CheckOptions {
  double capacity_tolerance = 1e-9;  // relative
  bool verify_late_slack = true;
  long long max_sweep_arcs = 2'000'000;
  int samples = 200'000;  // when sampling
};

struct CheckReport {
  bool ok = true;
  std::vector<std::string> errors;
  std::vector<double> overload;  // per link: mean max(0, gated load − B)/B over time
  [[nodiscard]] std::string Summary() const;
};

[[nodiscard]] CheckReport CheckPlan(const Problem& problem, const Plan& plan,
                                    const CheckOptions& options = {});

}  // namespace metronome::planner
