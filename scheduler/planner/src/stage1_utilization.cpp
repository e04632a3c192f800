// Stage 1 — utilization.
//
// Objective: serve as much of each link's load as possible with no contention among gated jobs,
// compared priority class by priority class (Score::served_by_priority). A job is admitted
// (gated) at the smallest candidate period — P, then the harmonic stretches within the bound
// stage 2 sets — at which it has a free offset on every link it crosses; otherwise it is
// best-effort: ungated at its natural period, yielding to the higher-ranked windows on its
// links (ranked_yields.hpp). No window is aimed for it: where the gated periods are unrelated
// to its own, an aimed window meets them as much as a drifting phase does and only adds its
// headroom and gate waits (docs/decisions/0011).
//
// Jobs are admitted in priority order, so when a link is oversubscribed it is the lowest
// priorities that are stretched or left best-effort; within one priority, running jobs come
// first (they hold their place) and then larger loads (w/P times links crossed), the classic
// "largest first" rule that leaves fewer unusable gaps.
//
// Cost per job: for each candidate period (harmonic_periods.cpp) one free-range query
// (occupancy.cpp), O(a log a) for a arcs on its links; usually the first candidate fits.
#include <algorithm>

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

}  // namespace metronome::planner::detail
