// Stage 2 — latency.
//
// Objective: minimize Σ_j π_j·(T_j − P_j)/P_j (the priority-weighted slowdown from stretching)
// plus the one-time cost of moving running jobs, move_cost_weight·π_j·delay_j/P_j, where
// delay_j is how much later than planned its next window opens after the move.
//
// Stage 1 proposes the least-stretched admissible period; stage 2 decides per job:
//   - a running job whose place is still free stays unless the alternative's cost is lower by
//     more than min_move_gain (so re-planning leaves jobs still when nothing is gained);
//   - a running job that must move takes the free offset reached with the least delay;
//   - a new job is packed: the free range that fits it most tightly (best fit), at its start,
//     against the end of the window before it; stage 3 then spreads the slack;
//   - a stretch is only worth it when it costs less than running ungated at P would: its own
//     expected slowdown from the windows it meets plus theirs from its traffic. The windows of
//     higher-priority jobs it would yield to (ranked_yields.hpp) cost it the wait for them and
//     them nothing; only where its phases do not fit between them is it their harm, counted
//     higher_priority_protection times over. So a lightly loaded link does not stretch a job
//     by 2/3 to save a neighbour a few percent of contention, nor one that can wait for its
//     betters' windows to keep out of them;
//   - gating at all must pay for the jitter headroom: the job's own, and its peers' where its
//     gate alone would gate them, cost less than its running ungated (else it drifts, and they
//     with it).
//
// Cost per job: one stay check and one stage-1 query, O(a log a).
#include <algorithm>
#include <limits>

#include "metronome/planner/ranked_yields.hpp"
#include "workspace.hpp"

namespace metronome::planner::detail {

double StretchCost(const JobShape& shape, Nanos period) {
  return shape.weight * static_cast<double>(period - shape.p) / static_cast<double>(shape.p);
}

double MoveCost(const Workspace& ws, std::uint32_t j, Nanos period, Nanos offset) {
  const Slot& s = ws.slots[j];
  if (!s.has_prev || !s.prev_gated) return 0.0;
  const Nanos delay = Mod(offset - s.prev_offset, period);
  if (delay == 0 && period == s.prev_period) return 0.0;
  const JobShape& shape = ws.jobs[j].shape;
  return ws.options.move_cost_weight * shape.weight * static_cast<double>(delay) /
         static_cast<double>(shape.p);
}

// A job waits for the higher windows it yields to only where they and its own phases leave a
// tenth of the time free: closer to a full link its waits grow without bound, as a queue's do
// near saturation, and it runs into them instead.
constexpr double kYieldRoom = 0.9;

// Whether a gated occupant of the job's k-th link would share the wire with it: another job, too
// tall to run beside it within the link's capacity.
bool SharesWire(const Workspace& ws, const JobShape& shape, std::size_t k,
                const Workspace::Occupant& o) {
  return static_cast<std::int32_t>(o.job) != shape.self &&
         o.height + shape.height[k] > ws.topology.GetLink(shape.links[k]).capacity_bps * (1 + 1e-9);
}

double UngatedCost(const Workspace& ws, const JobShape& shape) {
  const double d = static_cast<double>(shape.w) / static_cast<double>(shape.p);
  double own = 0.0;
  double others = 0.0;
  // A neighbour met on several links is slowed once (its one transfer), not once per link.
  static thread_local std::vector<std::uint32_t> met;
  met.clear();
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    const LinkId l = shape.links[k];
    double busy = 0.0;  // share of time the link carries windows of its peers it would share
    // The windows ranked above it, which it would yield to (ranked_yields.hpp): its expected
    // wait for them, the share of time they take, and the harm its traffic would do them if
    // it could not wait.
    double yield_wait = 0.0;
    double higher = 0.0;
    double higher_harm = 0.0;
    for (const auto& o : ws.link_jobs[l]) {
      if (!SharesWire(ws, shape, k, o)) continue;
      const JobShape& other = ws.jobs[o.job].shape;
      const auto period = static_cast<double>(ws.slots[o.job].period);
      const bool first = std::find(met.begin(), met.end(), o.job) == met.end();
      if (first) met.push_back(o.job);
      const double duty = static_cast<double>(other.w) / period;
      // What its traffic would take from the other's phases.
      const double harm =
          first ? other.weight * d * static_cast<double>(other.w) / static_cast<double>(other.p)
                : 0.0;
      if (!RanksAbove(other.priority, shape.priority)) {
        busy += duty;
        others += harm;
        continue;
      }
      // A phase that starts within its window, or whose window opens while it runs, waits for
      // it to close: with a phase of w, a window of w_o every T_o, (w_o + w)² / 2T_o a phase.
      const double span = static_cast<double>(other.w + shape.w);
      yield_wait += span * span / (2 * period);
      higher += duty;
      higher_harm += ws.options.higher_priority_protection * harm;
    }
    if (higher + d <= kYieldRoom) {
      own = std::max(
          own, std::min(1.0, d * std::min(1.0, busy) + yield_wait / static_cast<double>(shape.p)));
    } else {  // no time to spare between those windows: it runs into them, as into a peer's
      own = std::max(own, d * std::min(1.0, busy + higher));
      others += higher_harm;
    }
  }
  return shape.weight * own + others;
}

// The jitter headroom that gating a job of this shape (not placed) would make its peers pay: the
// gated jobs on its links that its traffic would share the wire with, whose gates protect
// nothing now (no one to take turns with: their entries open them, NeedsNoGate) and that it,
// drifting, would not yield to. Gating it gates them too. Counted until it reaches `enough`.
double PeersHeadroom(const Workspace& ws, const JobShape& shape, double enough) {
  double cost = 0.0;
  static thread_local std::vector<std::uint32_t> counted;
  counted.clear();
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    const LinkId l = shape.links[k];
    if (GatedOverflow(ws, l)) continue;  // its windows take turns already, with or without it
    for (const auto& o : ws.link_jobs[l]) {
      if (!SharesWire(ws, shape, k, o) ||
          std::find(counted.begin(), counted.end(), o.job) != counted.end()) {
        continue;
      }
      counted.push_back(o.job);
      if (ProtectsFrom(ws, o.job, shape, l) || !NeedsNoGate(ws, o.job)) continue;
      const JobShape& peer = ws.jobs[o.job].shape;
      cost += StretchCost(peer, peer.headroom_t0);
      if (cost >= enough) return cost;
    }
  }
  return cost;
}

// A job gated pays its jitter headroom whatever it gains: two DLRM jobs whose phases collided for
// 2.4 % of their period took turns at 3.5 % over it (1.1 % slower than sharing the link).
bool HeadroomPays(const Workspace& ws, const JobShape& shape, double ungated) {
  if (ungated <= 0.0) return true;
  const double own = StretchCost(shape, shape.headroom_t0);
  return own < ungated && own + PeersHeadroom(ws, shape, ungated - own) < ungated;
}

Nanos StretchBound(const Workspace& ws, const JobShape& shape, double ungated) {
  const double p = static_cast<double>(shape.p);
  const double t0 = static_cast<double>(shape.t0);
  const double cap = std::max(ws.options.max_stretch * p, t0);
  const double worth = ungated / shape.weight;  // in units of (T − P)/P
  // The jitter headroom (T0 − P) is not a stretch: whether gating pays for it, HeadroomPays says.
  // Clamped before the conversion: a neighbour of a huge priority weight makes the worth huge.
  return static_cast<Nanos>(std::clamp(p + worth * p, t0, cap));
}

namespace {

// The free offset reached with the least delay after x: x itself when it is free.
Nanos LeastDelay(const Fit& fit, Nanos x) {
  const Nanos t = fit.period;
  x = Mod(x, t);
  Nanos best = 0;
  Nanos best_delay = std::numeric_limits<Nanos>::max();
  for (const FreeRange& r : fit.ranges) {
    if ((r.a <= x && x <= r.b) || (r.a <= x + t && x + t <= r.b)) return x;
    const Nanos d = Mod(r.a - x, t);
    if (d < best_delay) {
      best_delay = d;
      best = r.a;
    }
  }
  return Mod(best, t);
}

// Chooses an offset inside the free ranges of a fit.
Nanos ChooseOffset(const Workspace& ws, std::uint32_t j, const Fit& fit) {
  const Slot& s = ws.slots[j];
  const Nanos t = fit.period;
  // Running gated: least delay from where it was (the offline search explores, below).
  if (s.has_prev && s.prev_gated && ws.rng == nullptr) return LeastDelay(fit, s.prev_offset);
  // Running ungated, its next phase known: least delay from when that phase comes, so that it
  // need not wait for its first window (a free place is worth more here than a tight one).
  const Nanos next_phase = ws.jobs[j].job.next_phase_ns;
  if (next_phase != kUnknownPhase && ws.rng == nullptr) return LeastDelay(fit, next_phase);
  if (ws.rng != nullptr) {  // offline search: a random range, its start or a random point
    auto& rng = *ws.rng;
    const FreeRange& r =
        fit.ranges[std::uniform_int_distribution<std::size_t>(0, fit.ranges.size() - 1)(rng)];
    if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) return Mod(r.a, t);
    return Mod(std::uniform_int_distribution<Nanos>(r.a, r.b)(rng), t);
  }
  const FreeRange* best = &fit.ranges.front();  // best fit: the tightest range, at its start
  for (const FreeRange& r : fit.ranges) {
    if (r.b - r.a < best->b - best->a) best = &r;
  }
  return Mod(best->a, t);
}

}  // namespace

bool PlaceJob(Workspace& ws, std::uint32_t j) {
  Slot& slot = ws.slots[j];
  const JobShape& shape = ws.jobs[j].shape;
  const bool running = slot.has_prev && slot.prev_gated;
  if (shape.links.empty()) {  // crosses no link: nothing to share, nothing to gate
    ws.PlaceGated(j, shape.p, 0);
    slot.movable = false;
    return false;
  }
  ws.Unplace(j);
  bool can_stay = false;
  // Its place is still free (checked exactly, whatever the other periods): it may stay.
  if (running && slot.prev_period >= shape.p &&
      (slot.prev_period <= shape.t0 || static_cast<double>(slot.prev_period) <=
                                           ws.options.max_stretch * static_cast<double>(shape.p))) {
    FreeRange r;
    can_stay = ws.RangeContaining(shape, slot.prev_period, slot.prev_offset, r);
  }
  if (can_stay && ws.rng != nullptr && std::uniform_int_distribution<int>(0, 3)(*ws.rng) == 0) {
    can_stay = false;  // offline search: sometimes explore moving a running job
  }
  // Gated only where its headroom pays (HeadroomPays); what a stretch beyond it is worth,
  // StretchBound judges.
  const double ungated = UngatedCost(ws, shape);
  const bool worth = HeadroomPays(ws, shape, ungated);
  const double stay_cost = can_stay ? StretchCost(shape, slot.prev_period) : 0.0;
  can_stay = can_stay && worth;
  static thread_local Fit fit;
  const Nanos bound = StretchBound(ws, shape, ungated);
  if (worth && FirstFit(ws, shape, fit, can_stay ? std::min(slot.prev_period, bound) : bound)) {
    const Nanos offset = ChooseOffset(ws, j, fit);
    const double cost = StretchCost(shape, fit.period) + MoveCost(ws, j, fit.period, offset);
    if (!can_stay || cost < stay_cost - ws.options.min_move_gain) {
      ws.PlaceGated(j, fit.period, offset);
      // A window opened right where the job's next phase comes stays there (stage 3 slides the
      // others), as a running job that stays does: moving it would make that phase wait.
      const Nanos next_phase = ws.jobs[j].job.next_phase_ns;
      slot.movable = running || next_phase == kUnknownPhase || ws.rng != nullptr ||
                     offset != Mod(next_phase, fit.period);
      return running;
    }
  }
  if (can_stay) {
    ws.PlaceGated(j, slot.prev_period, slot.prev_offset);
    slot.movable = false;
    return false;
  }
  ws.PlaceBestEffort(j);
  slot.movable = false;
  return running;
}

}  // namespace metronome::planner::detail
