// Model helpers: profiles, a job's links, priority weights, validation, plan look-ups.
#include "metronome/planner/model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "metronome/planner/plan.hpp"

namespace metronome::planner {

JobProfile JobProfile::FromVolume(Nanos compute_ns, double volume_bytes, double beta_bps) {
  JobProfile p;
  p.beta_bps = beta_bps;
  p.comm_ns = beta_bps > 0 ? static_cast<Nanos>(std::llround(volume_bytes / beta_bps * 1e9)) : 0;
  p.period_ns = compute_ns + p.comm_ns;
  return p;
}

double JobProfile::DutyCycle() const {
  return period_ns > 0 ? static_cast<double>(comm_ns) / static_cast<double>(period_ns) : 0.0;
}

std::vector<LinkId> JobLinks(const Topology& topology, const Job& job) {
  std::vector<LinkId> links = topology.LinksCrossed(job.nodes);
  links.insert(links.end(), job.extra_links.begin(), job.extra_links.end());
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return links;
}

std::vector<std::size_t> LinkGroups(const std::vector<std::vector<LinkId>>& links) {
  std::vector<std::size_t> up(links.size());
  std::iota(up.begin(), up.end(), 0);
  const auto root = [&](std::size_t j) {
    while (up[j] != j) j = up[j] = up[up[j]];
    return j;
  };
  std::unordered_map<LinkId, std::size_t> first_on;  // the first job on each link
  for (std::size_t j = 0; j < links.size(); ++j) {
    for (const LinkId l : links[j]) {
      const auto [it, fresh] = first_on.emplace(l, j);
      if (!fresh) up[root(j)] = root(it->second);
    }
  }
  std::unordered_map<std::size_t, std::size_t> number;  // by root
  std::vector<std::size_t> group(links.size());
  for (std::size_t j = 0; j < links.size(); ++j) {
    group[j] = number.try_emplace(root(j), number.size()).first->second;
  }
  return group;
}

Nanos RoundUpPeriod(Nanos period, Nanos grid) {
  if (grid <= 1 || period <= 0) return period;
  Nanos g = 1;
  while (g <= grid / 10 && g * 10 <= period / 100) g *= 10;
  if (g > grid) g = grid;
  return period + (g - period % g) % g;
}

double PriorityWeight(int priority) {
  return 1.0 + std::max(priority, 0);
}

void ValidateJob(const Topology& topology, const Job& job, std::vector<std::string>& errors) {
  const std::string who = std::string("job ").append(std::to_string(job.id)).append(": ");
  const JobProfile& p = job.profile;
  if (p.period_ns <= 0) errors.push_back(who + "natural period must be > 0");
  if (p.comm_ns < 0) errors.push_back(who + "communication time must be >= 0");
  if (p.comm_ns > p.period_ns) errors.push_back(who + "communication time exceeds the period");
  if (!(p.beta_bps > 0) || !std::isfinite(p.beta_bps)) errors.push_back(who + "beta must be > 0");
  if (p.jitter_ns < 0 || (p.period_ns > 0 && p.jitter_ns > p.period_ns)) {
    errors.push_back(who + "jitter must be in [0, period]");
  }
  for (const NodeId n : job.nodes) {
    if (n >= topology.NodeCount()) errors.push_back(who + "unknown node " + std::to_string(n));
  }
  for (const LinkId l : job.extra_links) {
    if (l >= topology.LinkCount()) errors.push_back(who + "unknown link " + std::to_string(l));
  }
}

std::vector<std::string> Validate(const Problem& problem) {
  std::vector<std::string> errors;
  std::unordered_set<JobId> seen;
  for (const Job& job : problem.jobs) {
    if (!seen.insert(job.id).second) {
      errors.push_back(std::string("job ").append(std::to_string(job.id)).append(": duplicate id"));
    }
    ValidateJob(problem.topology, job, errors);
  }
  for (std::size_t l = 0; l < problem.topology.LinkCount(); ++l) {
    const Link& link = problem.topology.GetLink(static_cast<LinkId>(l));
    if (!(link.capacity_bps > 0)) errors.push_back("link " + link.name + ": capacity must be > 0");
  }
  return errors;
}

const JobPlan* Plan::Find(JobId id) const {
  for (const JobPlan& j : jobs) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

Timetable MakeTimetable(Nanos period_ns, Nanos offset_ns, Nanos window_ns, Nanos cushion_ns) {
  const Nanos free_after = std::max<Nanos>(0, period_ns - window_ns);
  Timetable t;
  t.period_ns = period_ns;
  t.offset_ns = offset_ns;
  t.window_ns = window_ns;
  t.late_slack_ns = cushion_ns;
  t.max_wait_ns = free_after;
  return t;
}

bool WideningStretches(const JobPlan& before, const JobPlan& after) {
  if (before.best_effort || after.best_effort) return false;
  const Nanos widening = std::max<Nanos>(after.timetable.window_ns - before.timetable.window_ns, 0);
  return after.timetable.period_ns > before.timetable.period_ns + 2 * widening;
}

bool Better(const Score& a, const Score& b, const PlannerOptions& o) {
  // Stage 1, class by class from the highest priority (a missing class serves 0).
  auto ia = a.served_by_priority.begin();
  auto ib = b.served_by_priority.begin();
  while (ia != a.served_by_priority.end() || ib != b.served_by_priority.end()) {
    int p = 0;
    if (ib == b.served_by_priority.end() ||
        (ia != a.served_by_priority.end() && ia->first >= ib->first)) {
      p = ia->first;
    } else {
      p = ib->first;
    }
    const double sa = (ia != a.served_by_priority.end() && ia->first == p) ? (ia++)->second : 0.0;
    const double sb = (ib != b.served_by_priority.end() && ib->first == p) ? (ib++)->second : 0.0;
    if (sa > sb + o.utilization_tolerance) return true;
    if (sa < sb - o.utilization_tolerance) return false;
  }
  if (a.latency < b.latency - o.latency_tolerance) return true;
  if (a.latency > b.latency + o.latency_tolerance) return false;
  return a.cushion_ns > b.cushion_ns + o.cushion_tolerance_ns;
}

}  // namespace metronome::planner
