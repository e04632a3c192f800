// What-if scoring (see what_if.h).
//
// Objective: rank candidate placements of one job by the slowdown they would cause, fast
// enough for the extender (1,000 candidates in a few milliseconds).
//
// Cost per candidate: resolving its links (O(n log n) for n nodes), the harmonic candidates,
// and one free-range query per candidate period, O(a log a) for a arcs on its links. The
// contention of the best-effort case is computed once per link and cached across candidates.
#include "metronome/planner/what_if.h"

#include <algorithm>
#include <unordered_map>

#include "contention.h"
#include "workspace.h"

namespace metronome::planner {

namespace detail {
void require_valid(const Topology& topology, const std::vector<Job>& jobs);
}  // namespace detail

using detail::Workspace;

namespace {

double gated_slowdown(const Workspace& ws, std::uint32_t i) {
  const detail::Slot& s = ws.slots[i];
  const detail::JobShape& shape = ws.jobs[i].shape;
  if (s.state != detail::SlotState::kGated) return 0.0;
  return static_cast<double>(s.period - shape.P) / static_cast<double>(shape.P);
}

// Contention factor a new ungated source of height h would see on link l.
double extra_factor(const Workspace& ws, LinkId l, double h) {
  std::vector<detail::GatedArc> gated;
  for (const auto& o : ws.link_jobs[l]) {
    const detail::Slot& s = ws.slots[o.job];
    gated.push_back({s.period, s.offset, ws.jobs[o.job].shape.w, o.height});
  }
  std::vector<detail::RandomLoad> random;
  for (const std::uint32_t k : ws.link_best_effort[l]) {
    const detail::JobShape& s = ws.jobs[k].shape;
    const auto pos = static_cast<std::size_t>(std::lower_bound(s.links.begin(), s.links.end(), l) -
                                              s.links.begin());
    random.push_back({static_cast<double>(s.w) / static_cast<double>(s.P), s.height[pos]});
  }
  return detail::LinkContention(ws.topology.link(l).capacity_bps, gated, random).extra_stretch(h);
}

}  // namespace

std::vector<WhatIfResult> what_if(const OnlinePlanner& planner, const Job& job,
                                  std::span<const std::vector<NodeId>> candidates,
                                  const WhatIfOptions& options) {
  const Workspace& ws = planner.workspace();
  {
    Job all = job;  // the profile once, and every candidate node
    all.nodes.clear();
    for (const std::vector<NodeId>& nodes : candidates) {
      all.nodes.insert(all.nodes.end(), nodes.begin(), nodes.end());
    }
    detail::require_valid(ws.topology, {all});
  }
  std::vector<WhatIfResult> results;
  results.reserve(candidates.size());
  std::unordered_map<LinkId, double> factor_cache;
  detail::Fit fit;
  std::vector<detail::Overlap> ov;
  Job probe = job;
  const double duty =
      static_cast<double>(job.profile.comm_ns) / static_cast<double>(job.profile.period_ns);
  for (const std::vector<NodeId>& nodes : candidates) {
    probe.nodes = nodes;
    detail::JobShape shape = ws.shape_for(probe);
    shape.self = detail::kNoOwner;
    shape.priority = job.priority;
    WhatIfResult r;
    auto neighbour = [&](std::uint32_t i, double added) {
      if (added <= 0) return;
      const detail::ResolvedJob& other = ws.jobs[i];
      r.neighbour_slowdown += other.shape.weight * added;
      if (other.job.priority > job.priority) r.hurts_higher_priority = true;
      if (options.list_affected) {
        const double before = gated_slowdown(ws, i);
        r.affected.push_back({other.job.id, before, before + added});
      }
    };
    if (shape.links.empty() ||
        detail::first_fit(ws, shape, fit, detail::stretch_bound(ws, shape))) {
      r.gated = true;
      r.period_ns = shape.links.empty() ? shape.P : fit.period;
      r.job_slowdown = static_cast<double>(r.period_ns - shape.P) / static_cast<double>(shape.P);
      if (options.list_affected) {
        for (const LinkId l : shape.links) {
          for (const auto& o : ws.link_jobs[l]) {
            const double s = gated_slowdown(ws, o.job);
            r.affected.push_back({ws.jobs[o.job].job.id, s, s});
          }
        }
      }
    } else {
      // Best-effort: it would take the window best_effort_slot() gives it and share bandwidth
      // with the windows it overlaps (first-order estimate: overlap time × excess height).
      const detail::BestEffortSlot be = detail::best_effort_slot(ws, shape);
      r.period_ns = be.period;
      const auto p_new = static_cast<double>(shape.P);
      double worst = 0.0;
      for (std::size_t k = 0; k < shape.links.size(); ++k) {
        const LinkId l = shape.links[k];
        if (be.drifting) {  // ungated: its phase drifts over everybody's windows
          auto [it, fresh] = factor_cache.try_emplace(l, 0.0);
          if (fresh) it->second = extra_factor(ws, l, shape.height[k]);
          worst = std::max(worst, (it->second - 1.0) * duty);
          const double capacity = ws.topology.link(l).capacity_bps;
          for (const auto& o : ws.link_jobs[l]) {
            const double excess = std::max(0.0, o.height + shape.height[k] - capacity) / capacity;
            neighbour(o.job, duty * excess * static_cast<double>(ws.jobs[o.job].shape.w) /
                                 static_cast<double>(ws.jobs[o.job].shape.P));
          }
          continue;
        }
        detail::overlaps(ws, shape, k, be.period, be.offset, ov);
        double mine = 0.0;
        for (const detail::Overlap& o : ov) {
          const detail::Slot& s = ws.slots[o.job];
          mine += o.share * static_cast<double>(be.period) * o.excess / p_new;
          neighbour(o.job, o.share * static_cast<double>(s.period) * o.excess /
                               static_cast<double>(ws.jobs[o.job].shape.P));
        }
        worst = std::max(worst, mine);
      }
      r.job_slowdown = static_cast<double>(be.period - shape.P) / p_new + worst;
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace metronome::planner
