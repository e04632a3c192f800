// Taking turns with the other job of a link that two jobs share (docs/decisions/0029).
//
// Where exactly two running jobs cross a link and no timetable keeps their phases apart (their
// periods are unrelated, or both spend most of their period on the wire), phases that collide
// share the link and both finish late. Served one after the other, the first finishes early and
// the second no later than it would have. The scheduler gives each job a TurnSet: its partners
// (the jobs it shares such a link with, ranked at or above it), their wire time and compute, and,
// as they happen, the begin and end of each of their phases on the wire, relayed a little late
// (decision 0029: pairs lose again once the relay takes more than about 2 ms). When its timetable
// and its yields let a phase go, the job holds it while a partner is seen in a phase and the turn
// is that partner's:
//
//   - a partner of higher priority: always;
//   - an equal seen in a phase begun at b, where W is a phase's time on the wire alone, C the
//     compute between phases, j the job that would hold and t now:
//       max(0, b + W(partner) - t) <= 2 W(j)  holding for the rest of that phase instead of
//                                             sharing with it costs j at most twice its phase;
//       W(partner) <= 4 W(j)                  a short phase does not queue behind a long one;
//       W(j) <= 2 C(partner)                  a long phase does not wait for a short one that is
//                                             back before it is done;
//       j held fewer than 3 phases in a row   no pair settles into one of them always waiting.
//
// It asks again when a partner's next edge arrives or the answer's time runs out, and holds no
// longer than its own natural period from its gate arrival, within its max wait. A partner seen
// in a phase for longer than twice its natural period is taken as quiet (its edges stopped
// coming) and is not waited for.
//
// Like yield.hpp this compiles for the host and, under nvcc, for the device: no library, no
// overflow, no unbounded loop.
#pragma once

#include <cstdint>

#include "metronome/common/timetable.hpp"

namespace metronome {

inline constexpr uint32_t kMaxTurnPartners = 4;
// How far ahead of its receiver's clock (the scheduler's, or a shim's estimate of it) a phase
// edge may be dated. Kept as a partner's latest, one dated further ahead (a clock stepped, a bad
// stamp) would read as a phase that never ends: the scheduler refuses it, a shim ignores it.
inline constexpr int64_t kEdgeAheadLimitNs = 100'000'000;

struct TurnPartner {
  uint64_t job = 0;        // the scheduler's id for it (its relayed edges carry it)
  bool higher = false;     // of higher priority; otherwise an equal
  int64_t wire_ns = 0;     // its phase on the wire alone; in (0, max_period]
  int64_t compute_ns = 0;  // its compute between phases; in [0, max_period]
  // Its latest phase begin and end seen (scheduler clock; 0: none yet). It is in a phase while
  // the begin is the later of the two.
  int64_t begun_ns = 0;
  int64_t ended_ns = 0;

  friend constexpr bool operator==(const TurnPartner&, const TurnPartner&) = default;
};

struct TurnSet {
  int64_t wire_ns = 0;    // the job's own phase on the wire alone; in (0, max_period]
  int64_t period_ns = 0;  // its natural period: the longest a phase holds; in (0, max_period]
  uint32_t count = 0;     // partners in use; at most kMaxTurnPartners
  TurnPartner partners[kMaxTurnPartners] = {};

  friend constexpr bool operator==(const TurnSet& a, const TurnSet& b) {
    if (a.wire_ns != b.wire_ns || a.period_ns != b.period_ns || a.count != b.count) return false;
    for (uint32_t i = 0; i < a.count && i < kMaxTurnPartners; ++i) {
      if (!(a.partners[i] == b.partners[i])) return false;
    }
    return true;
  }
};

// What ValidateTurnSet found. A rejected set is unusable (the job takes no turns).
enum TurnCheck : uint32_t {
  kTurnOk = 0,
  kRejectTurnCount = 1u << 0,    // more than kMaxTurnPartners partners
  kRejectTurnFigures = 1u << 1,  // a wire time, compute or period outside its range
};

[[nodiscard]] METRONOME_HD constexpr uint32_t ValidateTurnSet(const TurnSet& s,
                                                              const TimetableLimits& lim = {}) {
  if (s.count > kMaxTurnPartners) return kRejectTurnCount;
  uint32_t r = kTurnOk;
  if (s.wire_ns <= 0 || s.wire_ns > lim.max_period_ns) r |= kRejectTurnFigures;
  if (s.period_ns <= 0 || s.period_ns > lim.max_period_ns) r |= kRejectTurnFigures;
  for (uint32_t i = 0; i < s.count; ++i) {
    const TurnPartner& p = s.partners[i];
    if (p.wire_ns <= 0 || p.wire_ns > lim.max_period_ns) r |= kRejectTurnFigures;
    if (p.compute_ns < 0 || p.compute_ns > lim.max_period_ns) r |= kRejectTurnFigures;
  }
  return r;
}

// The factors of the rule's clauses for an equal (the ones decision 0029 measured).
struct TurnRule {
  int64_t rest_factor = 2;    // the partner's rest, in the job's own wire times
  int64_t length_factor = 4;  // the partner's phase, in the job's own wire times
  int64_t fit_factor = 2;     // the job's own phase, in the partner's computes
  uint32_t max_in_a_row = 3;  // phases in a row a job holds for an equal
};

struct TurnDecision {
  bool hold = false;
  bool for_equal = false;  // an equal is among those it holds for
  int64_t until_ns = 0;    // while holding: ask again by then (a partner's edge may come sooner)
};

// Whether the phase that reached the gate at `arrival_ns` and may go at `now_ns` (scheduler
// clock) holds for a partner's turn. `max_wait_ns`: the gate's cap on any hold;
// `held_in_a_row`: how many of the job's phases just before this one held for a turn. The set
// must have passed ValidateTurnSet.
[[nodiscard]] METRONOME_HD constexpr TurnDecision DecideTurn(const TurnSet& s, int64_t arrival_ns,
                                                             int64_t now_ns, int64_t max_wait_ns,
                                                             uint32_t held_in_a_row,
                                                             const TurnRule& rule = {}) {
  TurnDecision d;
  const int64_t longest = s.period_ns < max_wait_ns ? s.period_ns : max_wait_ns;
  const int64_t bound = SaturatingAdd(arrival_ns, longest);
  if (now_ns >= bound) return d;
  int64_t until = bound;
  for (uint32_t i = 0; i < s.count && i < kMaxTurnPartners; ++i) {
    const TurnPartner& p = s.partners[i];
    if (p.begun_ns <= p.ended_ns) continue;  // not in a phase, as far as it was seen
    const int64_t quiet_at = SaturatingAdd(p.begun_ns, 2 * (p.wire_ns + p.compute_ns));
    if (now_ns >= quiet_at) continue;
    if (!p.higher) {
      const int64_t rest = SaturatingSub(SaturatingAdd(p.begun_ns, p.wire_ns), now_ns);
      if (held_in_a_row >= rule.max_in_a_row || rest > rule.rest_factor * s.wire_ns ||
          p.wire_ns > rule.length_factor * s.wire_ns ||
          s.wire_ns > rule.fit_factor * p.compute_ns) {
        continue;
      }
      d.for_equal = true;
    }
    d.hold = true;
    if (quiet_at < until) until = quiet_at;
  }
  if (d.hold) d.until_ns = until;
  return d;
}

}  // namespace metronome
