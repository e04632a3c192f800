// Offline recalculation (see offline.hpp).
//
// Objective: the same lexicographic (stage 1, stage 2, stage 3) objective as the online method,
// with more time: escape the greedy's myopic choices (a job packed where it later blocks a
// bigger one, an order of windows that leaves a small cushion, a cycle of links).
//
// Cost: each iteration is one greedy construction O(Σ a log a) plus one evaluation; the
// number of iterations is set by the budget. Deterministic for a given seed and iteration cap.
#include "metronome/planner/offline.hpp"

#include <algorithm>
#include <optional>
#include <random>

#include "workspace.hpp"

namespace metronome::planner {

namespace detail {
void RequireValid(const Topology& topology, const std::vector<Job>& jobs);
void LoadJobs(Workspace& ws, const std::vector<Job>& jobs, const Plan* current);
std::vector<std::uint32_t> AliveJobs(const Workspace& ws);
}  // namespace detail

using detail::Workspace;

namespace {

// The current plan taken as it is (no optimization): its score is the one to beat.
Workspace AdoptCurrent(const Workspace& base) {
  Workspace ws = base;
  for (std::uint32_t j = 0; j < ws.jobs.size(); ++j) {
    detail::Slot& s = ws.slots[j];
    if (s.has_prev && s.prev_gated) {
      ws.PlaceGated(j, s.prev_period, s.prev_offset);
    } else {  // best-effort, or unknown to the current plan: it runs ungated
      ws.PlaceBestEffort(j);
    }
    s.movable = false;
  }
  return ws;
}

void Construct(Workspace& ws, const std::vector<std::uint32_t>& js, std::mt19937_64* rng) {
  ws.rng = rng;
  const std::vector<std::uint32_t> order = detail::PlacementOrder(ws, js);
  for (const std::uint32_t j : order) detail::PlaceJob(ws, j);
  ws.rng = nullptr;
  detail::RelaxCushions(ws, order, ws.options.cushion_sweeps + 1);
}

}  // namespace

std::optional<Plan> Recalculate(const Problem& problem, const Plan& current,
                                const OfflineOptions& options, std::stop_token stop,
                                OfflineStats* stats) {
  detail::RequireValid(problem.topology, problem.jobs);
  const auto deadline = std::chrono::steady_clock::now() + options.budget;
  Workspace base(problem.topology, options.planner);
  detail::LoadJobs(base, problem.jobs, &current);
  const std::vector<std::uint32_t> all = detail::AliveJobs(base);

  const Score current_score = detail::Evaluate(AdoptCurrent(base)).score;
  Score best_score = current_score;
  std::optional<Workspace> best_ws;
  std::optional<Plan> best_plan;
  std::mt19937_64 rng(options.seed);
  OfflineStats local;
  local.current = current_score;

  for (std::uint64_t it = 0;; ++it) {
    if (stop.stop_requested()) break;
    if (options.max_iterations > 0 && it >= options.max_iterations) break;
    if (options.max_iterations == 0 && std::chrono::steady_clock::now() >= deadline) break;
    Workspace ws = base;
    if (best_ws && std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
      // Ruin and recreate: clear all jobs of one busy link and re-place them.
      ws = *best_ws;
      std::vector<LinkId> busy;
      for (LinkId l = 0; l < ws.link_jobs.size(); ++l) {
        if (ws.link_jobs[l].size() + ws.link_best_effort[l].size() > 1) busy.push_back(l);
      }
      if (busy.empty()) continue;
      const LinkId l = busy[std::uniform_int_distribution<std::size_t>(0, busy.size() - 1)(rng)];
      std::vector<std::uint32_t> victims = ws.link_best_effort[l];
      for (const auto& o : ws.link_jobs[l]) victims.push_back(o.job);
      for (const std::uint32_t v : victims) {
        ws.Unplace(v);
        ws.slots[v].movable = true;
      }
      Construct(ws, victims, &rng);
    } else {
      Construct(ws, all, it == 0 ? nullptr : &rng);  // the first try is the plain greedy
    }
    ++local.iterations;
    Plan candidate = detail::Evaluate(ws);
    if (Better(candidate.score, best_score, options.planner)) {
      best_score = candidate.score;
      best_plan = std::move(candidate);
      best_ws = std::move(ws);
      ++local.improvements;
    }
  }
  local.best = best_score;
  if (stats != nullptr) *stats = local;
  // The plan in force runs: jobs are on their windows, and a moved job loses part of a period
  // to reach its new one. So the search's best replaces it only for a gain worth a move, in
  // stage 1 or 2 (min_move_gain, as for a running job online), not for every rounding: a
  // period one grid step shorter serves a fraction of a percent more and moved every job.
  PlannerOptions material = options.planner;
  material.utilization_tolerance =
      std::max(material.utilization_tolerance, options.planner.min_move_gain);
  material.latency_tolerance = std::max(material.latency_tolerance, options.planner.min_move_gain);
  if (best_plan && Better(best_plan->score, current_score, material)) return best_plan;
  return std::nullopt;
}

}  // namespace metronome::planner
