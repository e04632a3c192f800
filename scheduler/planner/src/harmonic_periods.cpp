// Stage 1, part one — harmonization.
//
// Objective: offer each job the periods T ≥ P at which it may be gated, least stretched first,
// such that its windows can interleave with those of the other jobs on its links. (P here is
// the natural period plus the jitter headroom, JobShape::T0: stop-and-wait needs a period a
// little longer than the mean iteration.)
//
// Two periodic windows of periods T and T_i meet exactly when their offsets differ by less
// than the windows modulo g = gcd(T, T_i) (occupancy.cpp). Harmonic periods — one dividing the
// other — give g = min(T, T_i), the most room; unrelated periods fit only when both windows fit
// into the small circle g. So the candidates are: the natural period P (unstretched, tried
// first, it fits whenever the gcd circles leave room), then the harmonic ones, T_i·k and T_i/k
// (exact in nanoseconds) of every period T_i already on the job's links, within max_stretch·P.
// Jobs are placed by priority, so the first period on a link is its highest-priority job's
// natural period: the design's suggested base T_base, with others at T_base·k or T_base/k.
//
// Cost: with c distinct periods on the job's links, O(c·(K + P_max/P)) candidates for a
// stretch bound K = max_stretch·P / p, sorted once.
#include <algorithm>
#include <cmath>

#include "workspace.hpp"

namespace metronome::planner::detail {

Nanos Workspace::Hyperperiod(LinkId link) const {
  Nanos h = 0;
  for (const auto& [p, count] : chains[link]) {
    h = h == 0 ? p : LcmCapped(h, p);
    if (h == 0) return 0;
  }
  return h;
}

void Workspace::CandidatePeriods(const JobShape& shape, std::vector<Nanos>& out) const {
  out.clear();
  const Nanos t0 = shape.t0;  // the natural period plus its jitter headroom
  const Nanos max_period = std::max(
      t0, static_cast<Nanos>(std::floor(options.max_stretch * static_cast<double>(shape.p))));
  std::vector<Nanos> bases;
  for (const LinkId l : shape.links) {
    for (const auto& [p, count] : chains[l]) bases.push_back(p);
  }
  out.push_back(t0);  // unstretched first: it fits whenever the gcd circles leave room
  if (bases.empty()) return;
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  constexpr Nanos kMaxFactor = 100000;  // guards absurd period ratios
  for (const Nanos p : bases) {
    if (p >= t0) {  // fractions p/k that are still ≥ t0 (k = 1 gives p itself)
      for (Nanos k = 1; k <= kMaxFactor && p / k >= t0; ++k) {
        if (p % k == 0 && p / k <= max_period) out.push_back(p / k);
      }
    }
    const Nanos k0 = std::max<Nanos>(1, (t0 + p - 1) / p);  // multiples p·k that are ≥ t0
    for (Nanos k = k0; k <= kMaxFactor && p * k <= max_period; ++k) out.push_back(p * k);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace metronome::planner::detail
