// Baseline: no time scheduling (see baselines.hpp).
//
// Objective: none — this is the reference. Every job is ungated at T = P; the contention
// model predicts what sharing the links costs.
//
// Cost: O(Σ_l m_l · m_l · G) for m_l jobs on link l (one distribution per job, G grid levels).
#include <algorithm>
#include <unordered_map>

#include "baseline_common.hpp"
#include "contention.hpp"
#include "metronome/planner/baselines.hpp"

namespace metronome::planner {

namespace detail {

void ScoreBaseline(const Problem& problem, Plan& plan) {
  const Topology& topo = problem.topology;
  std::vector<std::vector<std::size_t>> on_link(topo.LinkCount());
  std::vector<std::vector<LinkId>> links(problem.jobs.size());
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    links[j] = JobLinks(topo, problem.jobs[j]);
    for (const LinkId l : links[j]) on_link[l].push_back(j);
  }
  std::vector<double> extra(problem.jobs.size(), 0.0);
  plan.links.assign(topo.LinkCount(), LinkPlan{});
  for (LinkId l = 0; l < topo.LinkCount(); ++l) {
    LinkPlan& lp = plan.links[l];
    lp.link = l;
    lp.min_cushion_ns = -1;
    const double capacity = topo.GetLink(l).capacity_bps;
    std::vector<GatedArc> gated;
    std::vector<std::size_t> gated_ids;
    std::vector<RandomLoad> random;
    std::vector<std::size_t> random_ids;
    for (const std::size_t j : on_link[l]) {
      const Job& job = problem.jobs[j];
      const JobPlan& jp = plan.jobs[j];
      const double h = std::min(job.profile.beta_bps, capacity);
      lp.served_load += static_cast<double>(job.profile.comm_ns) * h /
                        (static_cast<double>(job.profile.period_ns) * capacity);
      if (jp.best_effort) {
        random.push_back({job.profile.DutyCycle(), h});
        random_ids.push_back(j);
        ++lp.best_effort_jobs;
      } else {
        gated.push_back(
            {jp.timetable.period_ns, jp.timetable.offset_ns, jp.timetable.window_ns, h});
        gated_ids.push_back(j);
        lp.hyperperiod_ns = std::max(lp.hyperperiod_ns, jp.timetable.period_ns);
        ++lp.gated_jobs;
      }
    }
    if (on_link[l].size() < 2) continue;
    const LinkContention lc(capacity, gated, random);
    lp.contention = lc.Overload();
    for (std::size_t i = 0; i < gated_ids.size(); ++i) {
      const std::size_t j = gated_ids[i];
      extra[j] =
          std::max(extra[j], (lc.GatedStretch(i) - 1.0) * problem.jobs[j].profile.DutyCycle());
    }
    for (std::size_t k = 0; k < random_ids.size(); ++k) {
      const std::size_t j = random_ids[k];
      extra[j] =
          std::max(extra[j], (lc.RandomStretch(k) - 1.0) * problem.jobs[j].profile.DutyCycle());
    }
  }
  plan.score = Score{};
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    const Job& job = problem.jobs[j];
    JobPlan& jp = plan.jobs[j];
    jp.predicted_slowdown = static_cast<double>(jp.timetable.period_ns - job.profile.period_ns) /
                                static_cast<double>(job.profile.period_ns) +
                            extra[j];
    plan.score.latency += PriorityWeight(job.priority) * jp.predicted_slowdown;
    for (const LinkId l : links[j]) {
      const double capacity = topo.GetLink(l).capacity_bps;
      const double h = std::min(job.profile.beta_bps, capacity);
      plan.score.utilization +=
          static_cast<double>(job.profile.comm_ns) * h /
          (static_cast<double>(job.profile.period_ns) * (1.0 + jp.predicted_slowdown) * capacity);
    }
  }
}

}  // namespace detail

Plan PlanWithoutTimeScheduling(const Problem& problem) {
  Plan plan;
  for (const Job& job : problem.jobs) {
    JobPlan jp;
    jp.id = job.id;
    jp.timetable = MakeTimetable(job.profile.period_ns, 0, job.profile.period_ns, 0);
    jp.best_effort = true;  // ungated
    plan.jobs.push_back(jp);
  }
  detail::ScoreBaseline(problem, plan);
  return plan;
}

}  // namespace metronome::planner
