// Stage 1 — utilization.
//
// Objective: serve as much of each link's load as possible with no contention among gated jobs,
// compared priority class by priority class (Score::served_by_priority). A job is admitted
// (gated) at the smallest candidate period — P, then the harmonic stretches within the bound
// stage 2 sets — at which it has a free offset on every link it crosses; otherwise it is
// best-effort.
//
// Jobs are admitted in priority order, so when a link is oversubscribed it is the lowest
// priorities that are stretched or left best-effort; within one priority, running jobs come
// first (they hold their place) and then larger loads (w/P times links crossed), the classic
// "largest first" rule that leaves fewer unusable gaps.
//
// Cost per job: for each candidate period (harmonic_periods.cpp) one free-range query
// (occupancy.cpp), O(a log a) for a arcs on its links; usually the first candidate fits.
#include <algorithm>
#include <iterator>
#include <numeric>

#include "workspace.hpp"

namespace metronome::planner::detail {

std::vector<std::uint32_t> PlacementOrder(const Workspace& ws,
                                          const std::vector<std::uint32_t>& js) {
  std::vector<std::uint32_t> order = js;
  auto load = [&](std::uint32_t j) {
    const JobShape& s = ws.jobs[j].shape;
    return static_cast<double>(s.w) / static_cast<double>(s.p) *
           static_cast<double>(s.links.size());
  };
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    const int px = ws.jobs[x].job.priority;
    const int py = ws.jobs[y].job.priority;
    if (px != py) return px > py;
    const bool rx = ws.slots[x].has_prev && ws.slots[x].prev_gated;
    const bool ry = ws.slots[y].has_prev && ws.slots[y].prev_gated;
    if (rx != ry) return rx;
    const double lx = load(x);
    const double ly = load(y);
    if (lx != ly) return lx > ly;
    return ws.jobs[x].job.id < ws.jobs[y].job.id;
  });
  if (ws.rng != nullptr) {  // offline search: shuffle within each priority class
    auto begin = order.begin();
    while (begin != order.end()) {
      const int p = ws.jobs[*begin].job.priority;
      auto end = std::find_if(begin, order.end(),
                              [&](std::uint32_t j) { return ws.jobs[j].job.priority != p; });
      std::shuffle(begin, end, *ws.rng);
      begin = end;
    }
  }
  return order;
}

bool FirstFit(const Workspace& ws, const JobShape& shape, Fit& fit, Nanos max_period) {
  static thread_local std::vector<Nanos> periods;
  ws.CandidatePeriods(shape, periods);
  for (const Nanos t : periods) {
    if (max_period > 0 && t > max_period) break;
    ws.FreeRanges(shape, t, fit.ranges);
    if (fit.ranges.empty()) continue;
    if (ws.rng != nullptr && std::uniform_int_distribution<int>(0, 9)(*ws.rng) == 0) {
      continue;  // offline search: now and then try a longer period
    }
    fit.period = t;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// What best-effort jobs get. A job that fits nowhere is not starved: it keeps its natural
// period and a window every period, placed where its overflow lands on the fewest,
// lowest-priority windows (cost Σ π_i·overlap_i·excess_i per unit time, a piecewise-linear
// function of the offset minimized exactly by sweeping its breakpoints). Its window is not
// protected: it shares bandwidth while it overlaps. Cost: O(A log A) for A windows on its links.
// ---------------------------------------------------------------------------------------------

namespace {

// Another window whose period makes more than this many distinct positions on the circle of the
// job being placed sweeps it (nearly) evenly: it cannot be aimed at or away from.
constexpr Nanos kMaxFoldCopies = 16;

Nanos CircularOverlap(Nanos x, Nanos w, Nanos s, Nanos len, Nanos t) {
  Nanos total = 0;
  for (Nanos k = -1; k * t <= len + t; ++k) {
    const Nanos lo = std::max(x, s + k * t);
    const Nanos hi = std::min(x + w, s + k * t + len);
    if (hi > lo) total += hi - lo;
  }
  return total;
}

// Calls f(job, height) for every window on link l, gated or best-effort (a drifting one too),
// with its rectangle's height there; f returns false to stop. Returns false if f stopped.
template <class F>
bool EachWindow(const Workspace& ws, LinkId l, F&& f) {
  for (const auto& o : ws.link_jobs[l]) {
    if (!f(o.job, o.height)) return false;
  }
  for (const std::uint32_t i : ws.link_best_effort[l]) {
    const JobShape& other = ws.jobs[i].shape;
    const auto pos = static_cast<std::size_t>(
        std::lower_bound(other.links.begin(), other.links.end(), l) - other.links.begin());
    if (!f(i, other.height[pos])) return false;
  }
  return true;
}

}  // namespace

// Every other window on one link, folded onto the circle of period t.
void FoldLink(const Workspace& ws, const JobShape& shape, std::size_t k, Nanos t,
              std::vector<Folded>& out) {
  const LinkId l = shape.links[k];
  const double capacity = ws.topology.GetLink(l).capacity_bps;
  const double h = shape.height[k];
  EachWindow(ws, l, [&](std::uint32_t i, double hi) {
    if (static_cast<std::int32_t>(i) == shape.self) return true;
    const Slot& s = ws.slots[i];
    if (s.drifting) return true;
    const double excess = (h + hi - capacity) / capacity;
    if (excess <= 1e-12) return true;
    const Nanos wi = ws.jobs[i].shape.w;
    // Periods T and T_i: i's windows fall on every multiple of g = gcd(T, T_i) of the circle
    // T, each as often: g/(T·T_i) of them per unit time.
    const Nanos g = std::gcd(t, s.period);
    if (t / g > kMaxFoldCopies) {
      // Nearly unrelated periods: i's windows sweep the circle evenly. No offset aims at or
      // away from them (one arc over the whole circle, which cost_curve leaves out), but a
      // window of length w meets them all the same, w·w_i/T_i per period t: overlaps() counts
      // them, so that traffic of an unrelated period is never taken for harmless.
      const double scale =
          static_cast<double>(wi) / (static_cast<double>(t) * static_cast<double>(s.period));
      out.push_back({0, t, ws.jobs[i].shape.weight * excess * scale, i, excess, scale});
      return true;
    }
    const double scale =
        static_cast<double>(g) / (static_cast<double>(t) * static_cast<double>(s.period));
    const double coef = ws.jobs[i].shape.weight * excess * scale;
    for (Nanos a = s.offset; a < s.offset + t; a += g) {
      out.push_back({Mod(a, t), wi, coef, i, excess, scale});
    }
    return true;
  });
}

void ComputeCostCurve(const Workspace& ws, const JobShape& shape, std::size_t k, Nanos t,
                      CostCurve& out) {
  static thread_local std::vector<Folded> arcs;
  arcs.clear();
  FoldLink(ws, shape, k, t, arcs);
  ComputeCostCurve(arcs, shape.w, t, out);
}

void ComputeCostCurve(const std::vector<Folded>& arcs, Nanos w, Nanos t, CostCurve& out) {
  out.c0 = 0.0;
  out.slope0 = 0.0;
  out.bends.clear();
  // The cost is piecewise linear in the offset x; its slope changes where the window's edges
  // meet an arc's edges (four bends per arc). Value and slope are taken at x = 0+.
  for (const Folded& a : arcs) {
    if (a.len >= t || w >= t) continue;  // covers the circle: (nearly) the same for every x
    out.bends.emplace_back(Mod(a.start - w, t), a.coef);
    out.bends.emplace_back(a.start, -a.coef);
    out.bends.emplace_back(Mod(a.start + a.len - w, t), -a.coef);
    out.bends.emplace_back(Mod(a.start + a.len, t), a.coef);
    out.c0 += a.coef * static_cast<double>(CircularOverlap(0, w, a.start, a.len, t));
    const auto inside = [&](Nanos lo, Nanos hi) {  // 0 ∈ [lo, hi) on the circle
      return Mod(-lo, t) < Mod(hi - lo, t);
    };
    if (inside(Mod(a.start - w, t), a.start)) out.slope0 += a.coef;
    if (inside(Mod(a.start + a.len - w, t), Mod(a.start + a.len, t))) out.slope0 -= a.coef;
  }
  std::sort(out.bends.begin(), out.bends.end());
}

Nanos MinimizeCurves(std::span<const CostCurve* const> curves, Nanos t) {
  (void)t;
  static thread_local std::vector<std::pair<Nanos, double>> merged;
  static thread_local std::vector<std::pair<Nanos, double>> scratch;
  merged.clear();
  double c = 0.0;
  double slope = 0.0;
  for (const CostCurve* curve : curves) {  // merge the sorted bend lists: O(A) per curve
    c += curve->c0;
    slope += curve->slope0;
    scratch.clear();
    std::merge(merged.begin(), merged.end(), curve->bends.begin(), curve->bends.end(),
               std::back_inserter(scratch));
    merged.swap(scratch);
  }
  Nanos best_x = 0;
  double best = c;
  Nanos at = 0;
  std::size_t i = 0;
  while (i < merged.size() && merged[i].first == 0) ++i;  // already in slope0
  while (i < merged.size()) {
    const Nanos next = merged[i].first;
    c += slope * static_cast<double>(next - at);
    at = next;
    while (i < merged.size() && merged[i].first == at) slope += merged[i++].second;
    if (c < best - 1e-15) {
      best = c;
      best_x = at;
    }
  }
  return best_x;
}

namespace {

// Whether a window of period t can be aimed at all: every window it cannot stack with on its
// links has a period commensurate with t (at most kMaxFoldCopies positions on the circle).
// Otherwise those windows sweep across it whatever its offset, and holding the job to a window
// would only cost it its gate waits.
bool Aimable(const Workspace& ws, const JobShape& shape, Nanos t) {
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    const LinkId l = shape.links[k];
    const double capacity = ws.topology.GetLink(l).capacity_bps;
    const bool related = EachWindow(ws, l, [&](std::uint32_t i, double hi) {
      if (static_cast<std::int32_t>(i) == shape.self || ws.slots[i].drifting) return true;
      if (shape.height[k] + hi <= capacity * (1 + 1e-9)) return true;  // they stack
      return t / std::gcd(t, ws.slots[i].period) <= kMaxFoldCopies;
    });
    if (!related) return false;
  }
  return true;
}

// Stage 2's cost of a best-effort window of the shape at period t and offset x, per unit time:
// its stretch, and its overlap with each window it cannot stack with, weighted by both jobs'
// π (the overlap slows both transfers) and by the excess height.
double AimedCost(const Workspace& ws, const JobShape& shape, Nanos t, Nanos x) {
  double cost = StretchCost(shape, t);
  static thread_local std::vector<Overlap> ov;
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    Overlaps(ws, shape, k, t, x, ov);
    for (const Overlap& o : ov) {
      cost += (ws.jobs[o.job].shape.weight + shape.weight) * o.excess * o.share;
    }
  }
  return cost;
}

// The same for the job drifting ungated at P: it meets each of those windows at a random phase,
// for the product of their duty cycles.
double DriftingCost(const Workspace& ws, const JobShape& shape) {
  const double d = static_cast<double>(shape.w) / static_cast<double>(shape.p);
  double cost = 0.0;
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    const LinkId l = shape.links[k];
    const double capacity = ws.topology.GetLink(l).capacity_bps;
    EachWindow(ws, l, [&](std::uint32_t i, double hi) {
      const Slot& s = ws.slots[i];
      if (static_cast<std::int32_t>(i) == shape.self || s.drifting) return true;
      const double excess = (shape.height[k] + hi - capacity) / capacity;
      if (excess <= 1e-12) return true;
      const JobShape& other = ws.jobs[i].shape;
      cost += (other.weight + shape.weight) * excess * d * static_cast<double>(other.w) /
              static_cast<double>(s.period);
      return true;
    });
  }
  return cost;
}

// The offset at which a window of period t overlaps the least priority-weighted traffic.
Nanos Aim(const Workspace& ws, const JobShape& shape, Nanos t) {
  static thread_local std::vector<CostCurve> curves;
  static thread_local std::vector<const CostCurve*> pointers;
  curves.resize(std::max(curves.size(), shape.links.size()));
  pointers.clear();
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    ComputeCostCurve(ws, shape, k, t, curves[k]);
    pointers.push_back(&curves[k]);
  }
  return MinimizeCurves(pointers, t);
}

// The period a best-effort window of this shape could be aimed at, or 0.
Nanos AimedPeriod(const Workspace& ws, const JobShape& shape) {
  static thread_local std::vector<Nanos> periods;
  ws.CandidatePeriods(shape, periods);
  if (periods.empty()) return 0;
  const Nanos t = periods.front();
  // A stretched window is only worth it when the stretch costs less than running ungated at
  // P would (see stretch_bound in stage2_latency.cpp).
  if (t > StretchBound(ws, shape) || !Aimable(ws, shape, t)) return 0;
  return t;
}

}  // namespace

bool BestEffortUnaimable(const Workspace& ws, const JobShape& shape) {
  return AimedPeriod(ws, shape) == 0;
}

// Aimed only when that avoids more overlap than its headroom costs: where the windows it cannot
// stack with cover its circle, the aimed window meets them as much as a drifting one would, and
// holding the job to it only adds the headroom and gate waits (on heterogeneous-13, aimed
// best-effort jobs waited 3–13 ms per iteration at their gates and their phases were no faster).
BestEffortSlot ComputeBestEffortSlot(const Workspace& ws, const JobShape& shape) {
  BestEffortSlot slot;
  slot.period = shape.p;  // drifting: ungated at its natural pace
  const Nanos t = AimedPeriod(ws, shape);
  if (t == 0) return slot;
  const Nanos x = Aim(ws, shape, t);
  if (AimedCost(ws, shape, t, x) >= DriftingCost(ws, shape)) return slot;
  slot = {t, x, false};
  return slot;
}

void RefreshBestEffort(Workspace& ws, const std::vector<std::uint32_t>& js) {
  std::vector<std::uint32_t> be;
  for (const std::uint32_t j : js) {
    if (ws.slots[j].state == SlotState::kBestEffort) be.push_back(j);
  }
  for (const std::uint32_t j : PlacementOrder(ws, be)) {
    ws.Unplace(j);
    const BestEffortSlot slot = ComputeBestEffortSlot(ws, ws.jobs[j].shape);
    ws.PlaceBestEffort(j, slot.period, slot.offset, slot.drifting);
  }
}

void Overlaps(const Workspace& ws, const JobShape& shape, std::size_t link_index, Nanos period,
              Nanos offset, std::vector<Overlap>& out) {
  static thread_local std::vector<Folded> arcs;
  arcs.clear();
  FoldLink(ws, shape, link_index, period, arcs);
  Overlaps(arcs, shape.w, period, offset, out);
}

void Overlaps(const std::vector<Folded>& arcs, Nanos w, Nanos period, Nanos offset,
              std::vector<Overlap>& out) {
  out.clear();
  for (const Folded& a : arcs) {
    const Nanos ov = CircularOverlap(Mod(offset, period), w, a.start, a.len, period);
    if (ov <= 0) continue;
    const double share = static_cast<double>(ov) * a.scale;
    // FoldLink gives a job's copies one after another, so another window of the same job can
    // only follow the last entry (no search of the list).
    if (!out.empty() && out.back().job == a.job) {
      out.back().share += share;
    } else {
      out.push_back({a.job, share, a.excess});
    }
  }
}

}  // namespace metronome::planner::detail
