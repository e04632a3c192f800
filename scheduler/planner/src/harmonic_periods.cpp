// Stage 1, part one — harmonization.
//
// Objective: give every gated job a period T ≥ P that is harmonic with the other gated jobs on
// each link it crosses, so that each link's timetable repeats with a hyperperiod equal to its
// largest period and the circle of DESIGN.md §3 has H/T arcs per job.
//
// "Harmonic" here means the periods on a link form a divisibility chain: any two divide one
// another. A new job may take any T that keeps every link's chain a chain: a multiple T_base·k
// of a period already there, or an exact fraction T_base/k (exact in nanoseconds), for any of
// the periods already on its links; alone on all its links it keeps its natural period P.
// The first period on a link is therefore the natural period of the highest-priority job there
// (jobs are placed in priority order), which is the design's suggested base.
//
// Cost: with c distinct periods on the job's links, O(c·(K + P_max/P)) candidates, each checked
// against the c chain members: O(c²·K) for a stretch bound K = max_stretch·P / p.
#include <algorithm>
#include <cmath>

#include "workspace.h"

namespace metronome::planner::detail {

Nanos Workspace::hyperperiod(LinkId link) const {
  const auto& chain = chains[link];
  return chain.empty() ? 0 : chain.back().first;
}

bool Workspace::nests(const JobShape& shape, Nanos period) const {
  if (period <= 0) return false;
  for (const LinkId l : shape.links) {
    for (const auto& [p, count] : chains[l]) {
      if (p % period != 0 && period % p != 0) return false;
    }
  }
  return true;
}

void Workspace::candidate_periods(const JobShape& shape, std::vector<Nanos>& out) const {
  out.clear();
  const Nanos P = shape.P;
  const Nanos max_period =
      std::max(P, static_cast<Nanos>(std::floor(options.max_stretch * static_cast<double>(P))));
  std::vector<Nanos> bases;
  for (const LinkId l : shape.links) {
    for (const auto& [p, count] : chains[l]) bases.push_back(p);
  }
  if (bases.empty()) {
    out.push_back(P);
    return;
  }
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  constexpr Nanos kMaxFactor = 100000;  // guards absurd period ratios
  for (const Nanos p : bases) {
    if (p >= P) {  // fractions p/k that are still ≥ P (k = 1 gives p itself)
      for (Nanos k = 1; k <= kMaxFactor && p / k >= P; ++k) {
        if (p % k == 0 && p / k <= max_period) out.push_back(p / k);
      }
    }
    const Nanos k0 = std::max<Nanos>(1, (P + p - 1) / p);  // multiples p·k that are ≥ P
    for (Nanos k = k0; k <= kMaxFactor && p * k <= max_period; ++k) out.push_back(p * k);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  std::erase_if(out, [&](Nanos t) { return !nests(shape, t); });
}

}  // namespace metronome::planner::detail
