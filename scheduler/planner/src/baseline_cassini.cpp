// Baseline: a CASSINI-style policy (see baselines.hpp), written from the published description.
//
// Objective: per link, maximize the compatibility score 1 − mean over the unified circle of
// max(0, Σ demand − C)/C; then make one time shift per job consistent across its links.
//
// Method: jobs in arrival (id) order; on each link, each job tries `rotations` rotations of its
// own period and keeps the best score given the jobs rotated before it. Then a breadth-first
// traversal of the affinity graph (jobs and links, an edge per job–link pair) fixes each link's
// reference time from the first job that reaches it and each job's shift from the first link
// that reaches it; on a cycle the edge that closes it is simply not honoured.
//
// Cost: O(Σ_l m_l·R·S) for the rotations (m_l jobs on link l, R rotations, S samples), plus
// O(jobs + edges) for the traversal.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "baseline_common.hpp"
#include "metronome/planner/baselines.hpp"

namespace metronome::planner {

Plan PlanCassini(const Problem& problem, const CassiniOptions& options) {
  const Topology& topo = problem.topology;
  const std::size_t n = problem.jobs.size();
  std::vector<std::size_t> by_id(n);
  std::iota(by_id.begin(), by_id.end(), 0);
  std::sort(by_id.begin(), by_id.end(),
            [&](std::size_t a, std::size_t b) { return problem.jobs[a].id < problem.jobs[b].id; });
  std::vector<std::vector<LinkId>> links(n);
  std::vector<std::vector<std::size_t>> on_link(topo.LinkCount());
  for (const std::size_t j : by_id) {
    links[j] = JobLinks(topo, problem.jobs[j]);
    for (const LinkId l : links[j]) on_link[l].push_back(j);
  }

  // 1. Rotations on each link's unified circle.
  std::vector<std::unordered_map<std::size_t, Nanos>> rotation(topo.LinkCount());
  const int samples = std::max(1, options.samples);
  const int rotations = std::max(1, options.rotations);
  std::vector<double> base(static_cast<std::size_t>(samples));
  for (LinkId l = 0; l < topo.LinkCount(); ++l) {
    const auto& jobs = on_link[l];
    if (jobs.size() < 2) continue;
    const double capacity = topo.GetLink(l).capacity_bps;
    Nanos longest = 0;
    for (const std::size_t j : jobs) longest = std::max(longest, problem.jobs[j].profile.period_ns);
    Nanos circle = 1;
    for (const std::size_t j : jobs) {
      const Nanos p = problem.jobs[j].profile.period_ns;
      const Nanos g = std::gcd(circle, p);
      if (circle / g > options.max_circle_factor * longest / p) {
        circle = longest;  // incommensurate periods: the longest period is the circle
        break;
      }
      circle = circle / g * p;
    }
    std::fill(base.begin(), base.end(), 0.0);
    const double step = static_cast<double>(circle) / samples;
    for (const std::size_t j : jobs) {
      const JobProfile& prof = problem.jobs[j].profile;
      const double h = std::min(prof.beta_bps, capacity);
      const double arcs = std::max(
          1.0, std::round(static_cast<double>(circle) / static_cast<double>(prof.period_ns)));
      const double spacing = static_cast<double>(circle) / arcs;
      const auto width = static_cast<double>(prof.comm_ns);
      auto active = [&](double t, double rot) {
        double x = std::fmod(t - rot, spacing);
        if (x < 0) x += spacing;
        return x < width;
      };
      double best_score = -std::numeric_limits<double>::infinity();
      double best_rot = 0.0;
      for (int r = 0; r < rotations; ++r) {
        const double rot = static_cast<double>(r) * static_cast<double>(prof.period_ns) / rotations;
        double excess = 0.0;
        for (int s = 0; s < samples; ++s) {
          const double t = (s + 0.5) * step;
          const double d = base[static_cast<std::size_t>(s)] + (active(t, rot) ? h : 0.0);
          excess += std::max(0.0, d - capacity) / capacity;
        }
        const double score = 1.0 - excess / samples;
        if (score > best_score + 1e-12) {
          best_score = score;
          best_rot = rot;
        }
      }
      for (int s = 0; s < samples; ++s) {
        if (active((s + 0.5) * step, best_rot)) base[static_cast<std::size_t>(s)] += h;
      }
      rotation[l][j] = static_cast<Nanos>(std::llround(best_rot));
    }
  }

  // 2. One shift per job: breadth-first over the affinity graph.
  std::vector<Nanos> shift(n, 0);
  std::vector<char> job_seen(n, 0);
  std::vector<char> link_seen(topo.LinkCount(), 0);
  auto rot = [&](LinkId l, std::size_t j) {
    auto it = rotation[l].find(j);
    return it == rotation[l].end() ? Nanos{0} : it->second;
  };
  for (const std::size_t root : by_id) {
    if (job_seen[root]) continue;
    job_seen[root] = 1;
    std::deque<std::size_t> queue{root};
    while (!queue.empty()) {
      const std::size_t j = queue.front();
      queue.pop_front();
      for (const LinkId l : links[j]) {
        if (link_seen[l]) continue;
        link_seen[l] = 1;
        const Nanos reference = shift[j] - rot(l, j);
        for (const std::size_t k : on_link[l]) {
          if (job_seen[k]) continue;
          job_seen[k] = 1;
          shift[k] = reference + rot(l, k);
          queue.push_back(k);
        }
      }
    }
  }

  Plan plan;
  for (std::size_t j = 0; j < n; ++j) {
    const Job& job = problem.jobs[j];
    JobPlan jp;
    jp.id = job.id;
    const Nanos period = job.profile.period_ns;
    jp.timetable =
        MakeTimetable(period, ((shift[j] % period) + period) % period, job.profile.comm_ns, 0);
    plan.jobs.push_back(jp);
  }
  detail::ScoreBaseline(problem, plan);
  return plan;
}

}  // namespace metronome::planner
