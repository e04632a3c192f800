// What-if scoring (see what_if.hpp).
//
// Objective: rank candidate placements of one job by the slowdown they would cause, fast
// enough for the extender (1,000 candidates in a few milliseconds).
//
// Per query, each link's free segments (per period) are computed once (O(a log a) per link)
// and cached. Per candidate: resolving its links (O(n log n) for n nodes), the candidate
// periods, merges of the cached per-link segments, and for a best-effort outcome one pass over
// the windows on its links, O(k·a) — no re-plan.
#include "metronome/planner/what_if.hpp"

#include <algorithm>
#include <unordered_map>

#include "workspace.hpp"

namespace metronome::planner {

namespace detail {
void RequireValid(const Topology& topology, const std::vector<Job>& jobs);
}  // namespace detail

using detail::Workspace;

namespace {

double GatedSlowdown(const Workspace& ws, std::uint32_t i) {
  const detail::Slot& s = ws.slots[i];
  const detail::JobShape& shape = ws.jobs[i].shape;
  if (s.state != detail::SlotState::kGated) return 0.0;
  return static_cast<double>(s.period - shape.p) / static_cast<double>(shape.p);
}

// Free offsets of the job on one link at one period, as sorted segments of [0, t) that do not
// wrap. Cached across candidates: they depend only on the link, the period and the job.
using Segments = std::vector<std::pair<Nanos, Nanos>>;

struct SegmentCache {
  const Workspace& ws;
  std::unordered_map<std::uint64_t, Segments> cache;
  std::vector<detail::FreeRange> ranges;
  Segments current;
  Segments scratch;

  const Segments& Of(const detail::JobShape& shape, std::size_t k, Nanos t) {
    const LinkId l = shape.links[k];
    const std::uint64_t key = (static_cast<std::uint64_t>(t) << 20) ^ l;
    auto [it, fresh] = cache.try_emplace(key);
    if (fresh) {
      ws.FreeRanges(shape, t, ranges, l);
      for (const detail::FreeRange& r : ranges) {
        if (r.b < t) {
          it->second.emplace_back(r.a, r.b);
        } else {
          it->second.emplace_back(r.a, t - 1);
          it->second.emplace_back(0, r.b - t);
        }
      }
      std::sort(it->second.begin(), it->second.end());
    }
    return it->second;
  }

  // Whether some offset is free on every link of the shape at period t: O(Σ segments).
  bool Fits(const detail::JobShape& shape, Nanos t) {
    current = Of(shape, 0, t);
    for (std::size_t k = 1; k < shape.links.size() && !current.empty(); ++k) {
      const Segments& other = Of(shape, k, t);
      scratch.clear();
      std::size_t i = 0;
      std::size_t j = 0;
      while (i < current.size() && j < other.size()) {
        const Nanos lo = std::max(current[i].first, other[j].first);
        const Nanos hi = std::min(current[i].second, other[j].second);
        if (lo <= hi) scratch.emplace_back(lo, hi);
        if (current[i].second < other[j].second) {
          ++i;
        } else {
          ++j;
        }
      }
      current.swap(scratch);
    }
    return !current.empty();
  }
};

}  // namespace

std::vector<WhatIfResult> WhatIf(const OnlinePlanner& planner, const Job& job,
                                 std::span<const std::vector<NodeId>> candidates,
                                 const WhatIfOptions& options) {
  const Workspace& ws = planner.GetWorkspace();
  {
    Job all = job;  // the profile once, and every candidate node
    all.nodes.clear();
    for (const std::vector<NodeId>& nodes : candidates) {
      all.nodes.insert(all.nodes.end(), nodes.begin(), nodes.end());
    }
    detail::RequireValid(ws.topology, {all});
  }
  std::vector<WhatIfResult> results;
  results.reserve(candidates.size());
  SegmentCache segments{ws, {}, {}, {}, {}};
  std::vector<Nanos> periods;
  Job probe = job;
  for (const std::vector<NodeId>& nodes : candidates) {
    probe.nodes = nodes;
    detail::JobShape shape = ws.ShapeFor(probe);
    shape.self = detail::kNoOwner;
    shape.priority = job.priority;
    WhatIfResult r;
    auto neighbour = [&](std::uint32_t i, double added) {
      if (added <= 0) return;
      const detail::ResolvedJob& other = ws.jobs[i];
      r.neighbour_slowdown += other.shape.weight * added;
      if (other.job.priority > job.priority) r.hurts_higher_priority = true;
      if (options.list_affected) {
        const double before = GatedSlowdown(ws, i);
        r.affected.push_back({other.job.id, before, before + added});
      }
    };
    bool gated = shape.links.empty();
    Nanos period = shape.p;  // crosses no link: ungated at its natural pace
    if (!gated) {            // stage 1 as in first_fit, on the cached per-link free segments
      ws.CandidatePeriods(shape, periods);
      const double ungated = detail::UngatedCost(ws, shape);
      const Nanos bound = detail::HeadroomPays(ws, shape, ungated)
                              ? detail::StretchBound(ws, shape, ungated)
                              : 0;  // not worth gating at any period
      for (const Nanos t : periods) {
        if (t > bound) break;
        if (segments.Fits(shape, t)) {
          gated = true;
          period = t;
          break;
        }
      }
    }
    if (gated) {
      r.gated = true;
      r.period_ns = period;
      r.job_slowdown = static_cast<double>(r.period_ns - shape.p) / static_cast<double>(shape.p);
      if (options.list_affected) {
        for (const LinkId l : shape.links) {
          for (const auto& o : ws.link_jobs[l]) {
            const double s = GatedSlowdown(ws, o.job);
            r.affected.push_back({ws.jobs[o.job].job.id, s, s});
          }
        }
      }
    } else {
      // Best-effort: it would drift ungated at its natural period and meet each window on its
      // links that it cannot stack with for the product of their duty cycles, sharing
      // bandwidth meanwhile (first-order: overlapping time × excess height / B).
      r.period_ns = shape.p;
      const double duty = static_cast<double>(shape.w) / static_cast<double>(shape.p);
      for (std::size_t k = 0; k < shape.links.size(); ++k) {
        const double capacity = ws.topology.GetLink(shape.links[k]).capacity_bps;
        double mine = 0.0;
        for (const auto& o : ws.link_jobs[shape.links[k]]) {
          const double excess = (shape.height[k] + o.height - capacity) / capacity;
          if (excess <= 1e-12) continue;
          const detail::Slot& s = ws.slots[o.job];
          const detail::JobShape& other = ws.jobs[o.job].shape;
          // Overlapping time per unit time; per iteration of the other job, relative to its P.
          const double share = duty * static_cast<double>(other.w) / static_cast<double>(s.period);
          mine += share * excess;
          neighbour(o.job,
                    share * static_cast<double>(s.period) * excess / static_cast<double>(other.p));
        }
        r.job_slowdown = std::max(r.job_slowdown, mine);
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace metronome::planner
