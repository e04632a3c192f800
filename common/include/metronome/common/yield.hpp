// Ranked yielding: a phase does not start into the windows of the jobs ranked above its job on
// the links they share, whatever their periods.
//
// The scheduler ranks the jobs of each shared link by priority and gives each job a YieldSet: the
// windows of the gated higher-priority jobs there (planner/ranked_yields.hpp).
// Window i of the set opens at epoch_ns + offset_ns + k * period_ns (any k, scheduler clock)
// and lasts window_ns. The gate holds a phase until the first gap in those windows at least
// need_ns long (the phase's expected time on the wire), never longer than max_wait_ns; when
// there is no such gap in time it at least waits for the window it would start into to close,
// and otherwise goes as the timetable alone says. A phase whose rest would end within the set's
// allowance of a window's opening goes on instead of pausing: finishing costs that window's job
// a few milliseconds, pausing costs this one the whole window. Inside a phase every further
// collective yields the same way (DecideYield), for the gap its own share of the phase needs:
// a lower-ranked phase pauses between its collectives while a higher-ranked window is on the
// wire, so that lower-ranked jobs sharing what is left cannot run into it together.
//
// Like timetable.hpp this compiles for the host and, under nvcc, for the device gate kernel: no
// library, no overflow, no unbounded loop.
#pragma once

#include <cstdint>

#include "metronome/common/timetable.hpp"

namespace metronome {

inline constexpr uint32_t kMaxYieldWindows = 16;

struct YieldWindow {
  int64_t period_ns = 0;  // in the timetable limits
  int64_t offset_ns = 0;  // from YieldSet::epoch_ns; normalized into [0, period)
  int64_t window_ns = 0;  // in (0, period): a window as long as its period leaves no gap
  // 1 / period, filled by ValidateYieldSet: the gate finds a time's place in the period with a
  // multiplication instead of a division (a 64-bit division costs as much as the rest).
  double inv_period = 0.0;

  friend constexpr bool operator==(const YieldWindow&, const YieldWindow&) = default;
};

struct YieldSet {
  int64_t epoch_ns = 0;     // the plan's epoch (the timetable's)
  int64_t need_ns = 0;      // the gap a phase needs; in [0, max_period]
  int64_t max_wait_ns = 0;  // the longest a phase waits for a gap; in [0, max_wait_cap]
  // How far a transfer may run into the next window rather than wait for the gap after it
  // (what that window's cushion absorbs); in [0, max_period].
  int64_t tolerance_ns = 0;
  // How far past a window's opening a phase may end rather than pause for the whole window
  // (AllowedToFinish); in [0, max_period]. The planner shares a fifth of each window among the
  // jobs ranked below it.
  int64_t allowance_ns = 0;
  uint32_t count = 0;  // windows in use; at most kMaxYieldWindows
  YieldWindow windows[kMaxYieldWindows] = {};

  friend constexpr bool operator==(const YieldSet& a, const YieldSet& b) {
    if (a.epoch_ns != b.epoch_ns || a.need_ns != b.need_ns || a.max_wait_ns != b.max_wait_ns ||
        a.tolerance_ns != b.tolerance_ns || a.allowance_ns != b.allowance_ns ||
        a.count != b.count) {
      return false;
    }
    for (uint32_t i = 0; i < a.count && i < kMaxYieldWindows; ++i) {
      if (!(a.windows[i] == b.windows[i])) return false;
    }
    return true;
  }
};

// Nothing to yield to.
inline constexpr YieldSet kNoYields{};

// A job may have the shim issue its element-wise collectives (all-reduce, broadcast, reduce) in
// parts, each through the gate, so that it can pause between them for a higher-ranked window: a
// collective cannot be held once it runs. NCCL pairs the k-th call of every rank of a
// communicator, so the parts must be the same on every rank: the chunk size is a setting of the
// job (METRONOME_CHUNK_KIB, the same on all its ranks), never something that reaches its ranks at
// different times, such as a timetable (docs/decisions/0008). The smallest part, and the most
// parts one call becomes:
inline constexpr uint64_t kMinChunkBytes = uint64_t{1} << 16;
inline constexpr uint64_t kMaxChunkParts = 64;

// How many parts a collective of `bytes` is issued in under chunk size `chunk_bytes` (0: 1).
METRONOME_HD constexpr uint64_t ChunkParts(uint64_t bytes, uint64_t chunk_bytes) {
  if (chunk_bytes == 0 || bytes <= chunk_bytes) return 1;
  const uint64_t parts = bytes / chunk_bytes + (bytes % chunk_bytes != 0 ? 1 : 0);
  return parts < kMaxChunkParts ? parts : kMaxChunkParts;
}

// What ValidateYieldSet did. A rejected set is unusable (the gate yields to nothing).
enum YieldCheck : uint32_t {
  kYieldOk = 0,
  kRejectYieldCount = 1u << 0,   // more than kMaxYieldWindows windows
  kRejectYieldWindow = 1u << 1,  // a period outside the limits, or a window not in (0, period)
  kRejectYieldEpoch = 1u << 2,   // |epoch| beyond max_abs_epoch
  kRejectYieldNeed = 1u << 3,    // need, tolerance or allowance outside [0, max_period]
  kClampYieldOffset = 1u << 8,   // an offset outside [0, period): reduced modulo period
  kClampYieldWait = 1u << 9,     // max wait outside [0, max_wait_cap]
};
inline constexpr uint32_t kYieldRejectMask = 0xffu;

// Checks a set in place and fills each window's inverse period. The set is usable iff
// (result & kYieldRejectMask) == 0.
METRONOME_HD constexpr uint32_t ValidateYieldSet(YieldSet& y, const TimetableLimits& lim = {}) {
  uint32_t r = kYieldOk;
  if (y.count > kMaxYieldWindows) return kRejectYieldCount;
  if (y.epoch_ns > lim.max_abs_epoch_ns || y.epoch_ns < -lim.max_abs_epoch_ns) {
    r |= kRejectYieldEpoch;
  }
  if (y.need_ns < 0 || y.need_ns > lim.max_period_ns) r |= kRejectYieldNeed;
  if (y.tolerance_ns < 0 || y.tolerance_ns > lim.max_period_ns) r |= kRejectYieldNeed;
  if (y.allowance_ns < 0 || y.allowance_ns > lim.max_period_ns) r |= kRejectYieldNeed;
  for (uint32_t i = 0; i < y.count; ++i) {
    const YieldWindow& w = y.windows[i];
    if (w.period_ns < lim.min_period_ns || w.period_ns > lim.max_period_ns || w.window_ns <= 0 ||
        w.window_ns >= w.period_ns) {
      r |= kRejectYieldWindow;
    }
  }
  if (r != kYieldOk) return r;
  const int64_t wait = ClampI64(y.max_wait_ns, 0, lim.max_wait_cap_ns);
  if (wait != y.max_wait_ns) {
    y.max_wait_ns = wait;
    r |= kClampYieldWait;
  }
  for (uint32_t i = 0; i < y.count; ++i) {
    YieldWindow& w = y.windows[i];
    if (w.offset_ns < 0 || w.offset_ns >= w.period_ns) {
      w.offset_ns = FloorMod(w.offset_ns, w.period_ns);
      r |= kClampYieldOffset;
    }
    w.inv_period = 1.0 / static_cast<double>(w.period_ns);
  }
  return r;
}

// The decisions below take times from the set's epoch as doubles, exact only within 2^51 ns (26
// days) of it; further out they treat the set as stale and yield to nothing. A scheduler's epoch
// may be anything (the service's default is 0, the Unix epoch, 56 years from any clock reading),
// so whoever keeps a set for a gate moves its epoch to about the time first, and again before it
// grows stale: the same windows in time, each offset taken from the new epoch (exactly, with an
// integer division per window: off the hot path).
inline constexpr int64_t kYieldRebaseAfterNs = int64_t{1} << 48;  // 3.3 days: well inside 2^51

// Moves a validated set's epoch to `epoch_ns` (|epoch_ns| within the limits' max_abs_epoch;
// otherwise the set is left as it is). Returns whether it moved.
METRONOME_HD constexpr bool RebaseYieldSet(YieldSet& y, int64_t epoch_ns,
                                           const TimetableLimits& lim = {}) {
  if (epoch_ns > lim.max_abs_epoch_ns || epoch_ns < -lim.max_abs_epoch_ns) return false;
  if (epoch_ns == y.epoch_ns) return false;
  const int64_t shift = y.epoch_ns - epoch_ns;  // both within 2^62: no overflow
  for (uint32_t i = 0; i < y.count && i < kMaxYieldWindows; ++i) {
    YieldWindow& w = y.windows[i];
    w.offset_ns = FloorMod(w.offset_ns + FloorMod(shift, w.period_ns), w.period_ns);
  }
  y.epoch_ns = epoch_ns;
  return true;
}

// Whether a set kept for a gate is due to be moved to `now_ns` (RebaseYieldSet).
METRONOME_HD constexpr bool YieldSetDueForRebase(const YieldSet& y, int64_t now_ns) {
  if (y.count == 0) return false;
  const int64_t d = SaturatingSub(now_ns, y.epoch_ns);
  return d > kYieldRebaseAfterNs || d < -kYieldRebaseAfterNs;
}

// The functions below require a set that passed ValidateYieldSet.

// The opening of window w's occurrence that ends after t: the one t lies in, or else the next.
// `since_epoch` is t − YieldSet::epoch_ns.
METRONOME_HD constexpr int64_t OccurrenceEndingAfter(const YieldWindow& w, int64_t t,
                                                     int64_t since_epoch) {
  const int64_t x = since_epoch - w.offset_ns;  // |x| < 2^52 (NextClearStart): exact as a double
  int64_t phase = x - static_cast<int64_t>(static_cast<double>(x) * w.inv_period) * w.period_ns;
  // The product may round the quotient one off either way (toward zero for negative x too).
  if (phase < 0) phase += w.period_ns;
  if (phase < 0) phase += w.period_ns;
  if (phase >= w.period_ns) phase -= w.period_ns;
  const int64_t open = t - phase;
  return phase < w.window_ns ? open : open + w.period_ns;
}

namespace yield_detail {

// Whether a search from `from` up to `limit` can use the set: times are taken from the set's
// epoch, as doubles exact to the nanosecond (OccurrenceEndingAfter), so a set more than 2^51 ns
// (26 days) from `from` is stale, and a time that far from any real clock is garbage.
METRONOME_HD constexpr bool Searchable(const YieldSet& y, int64_t from, int64_t limit) {
  constexpr int64_t kSpan = int64_t{1} << 51;
  if (from > kInt64Max / 2 || from < kInt64Min / 2 || limit > kInt64Max / 2) return false;
  return from - y.epoch_ns <= kSpan && y.epoch_ns - from <= kSpan;
}

}  // namespace yield_detail

// Moves of the start before NextClearStart gives up (each move takes it past a window's end;
// more than this many means the windows leave no such gap nearby).
inline constexpr uint32_t kMaxYieldMoves = 4 * kMaxYieldWindows;

// The earliest t in [from, limit] such that [t, t + need) meets no window of the set, or
// kInt64Max when there is none (or none found within kMaxYieldMoves). One multiplication per
// window finds its occurrence at `from`; moving the start on only compares and adds. The scan
// goes round the windows and stops when `count` of them in a row leave the start where it is.
// `count`: only the set's first windows, the highest-ranked (at most y.count).
METRONOME_HD constexpr int64_t NextClearStart(const YieldSet& y, int64_t from, int64_t need,
                                              int64_t limit, uint32_t count) {
  if (!yield_detail::Searchable(y, from, limit)) return kInt64Max;
  if (count > y.count) count = y.count;
  if (count == 0) return from;
  const int64_t span = need > 0 ? need : 1;  // a phase of no length still must not start inside
  int64_t open[kMaxYieldWindows] = {};
  for (uint32_t i = 0; i < count; ++i) {
    open[i] = OccurrenceEndingAfter(y.windows[i], from, from - y.epoch_ns);
  }
  int64_t t = from;
  uint32_t moves = 0;
  uint32_t clear = 0;  // windows in a row that left t where it is
  for (uint32_t i = 0; clear < count; i = i + 1 == count ? 0 : i + 1) {
    const YieldWindow& w = y.windows[i];
    if (open[i] + w.window_ns <= t) {  // t moved past this occurrence: take the next
      open[i] += w.period_ns;
      if (open[i] + w.window_ns <= t) open[i] = OccurrenceEndingAfter(w, t, t - y.epoch_ns);
    }
    if (open[i] >= t + span) {  // [t, t + need) ends before it opens
      ++clear;
      continue;
    }
    t = open[i] + w.window_ns;
    if (t > limit || ++moves > kMaxYieldMoves) return kInt64Max;
    clear = 0;  // its next occurrence may still be too close: every window again
  }
  return t;
}
METRONOME_HD constexpr int64_t NextClearStart(const YieldSet& y, int64_t from, int64_t need,
                                              int64_t limit) {
  return NextClearStart(y, from, need, limit, y.count);
}

// What one gate keeps between its decisions, so that the next finds the same start as
// NextClearStart above at a fraction of the cost: each window's occurrence ending after the last
// decision's time, in the order they open, with the occurrence's end and the window's next
// opening at hand. A later decision moves the ended occurrences on by a period each (an
// addition, not a multiplication), and finds the gap in one pass in time order instead of going
// round all windows after every move. The order is a ring: an ended occurrence leaves its front
// and its next one, a period later, mostly joins the back without moving the others. Owned by
// one caller (the host gate's communicator: NCCL calls a communicator from one thread); valid
// for one set (FollowSet). Cache-line aligned: it is the gate's working set.
struct alignas(64) YieldCursor {
  uint64_t set_id = 0;  // the set it follows (FollowSet)
  bool built = false;
  uint8_t head = 0;  // the ring's first place
  uint32_t count = 0;
  int64_t from = 0;  // the occurrences end after this
  // By place in the ring, in the order the occurrences open (ties by window index):
  int64_t open[kMaxYieldWindows] = {};    // the occurrence's opening
  int64_t end[kMaxYieldWindows] = {};     // its end (open + window)
  int64_t next[kMaxYieldWindows] = {};    // the window's next opening (open + period)
  uint8_t window[kMaxYieldWindows] = {};  // whose
};

// Points the cursor at set `set_id`, whatever changes whenever the set may have (the shim: the
// timetable store's publication; not the timetable version alone, which a new scheduler starts
// again): another id empties it.
METRONOME_HD constexpr void FollowSet(YieldCursor& c, uint64_t set_id) {
  if (c.set_id == set_id) return;
  c.set_id = set_id;
  c.built = false;
}

namespace yield_detail {

// The ring's k-th place from its head.
METRONOME_HD constexpr uint32_t Place(const YieldCursor& c, uint32_t k) {
  return (c.head + k) & (kMaxYieldWindows - 1);
}
static_assert((kMaxYieldWindows & (kMaxYieldWindows - 1)) == 0, "the ring wraps by a mask");

METRONOME_HD constexpr void MovePlace(YieldCursor& c, uint32_t to, uint32_t from) {
  c.open[to] = c.open[from];
  c.end[to] = c.end[from];
  c.next[to] = c.next[from];
  c.window[to] = c.window[from];
}

// Window i's occurrence opening at `open`, put in its place among the ring's first n places
// (which has room for it), searching from the back: a next occurrence mostly opens last.
METRONOME_HD constexpr void PlaceFromBack(const YieldSet& y, YieldCursor& c, uint32_t i,
                                          int64_t open, uint32_t n) {
  uint32_t k = n;
  for (; k > 0; --k) {
    const uint32_t before = Place(c, k - 1);
    if (c.open[before] < open || (c.open[before] == open && c.window[before] < i)) break;
    MovePlace(c, Place(c, k), before);
  }
  const uint32_t at = Place(c, k);
  const YieldWindow& w = y.windows[i];
  c.open[at] = open;
  c.end[at] = open + w.window_ns;
  c.next[at] = open + w.period_ns;
  c.window[at] = static_cast<uint8_t>(i);
}

// Builds the cursor at `from`: a multiplication per window, then the windows sorted by their
// occurrence's opening (ties by index), then the ring filled in that order.
METRONOME_HD constexpr void Build(const YieldSet& y, YieldCursor& c, int64_t from) {
  int64_t open[kMaxYieldWindows] = {};
  uint8_t order[kMaxYieldWindows] = {};
  for (uint32_t i = 0; i < y.count; ++i) {
    open[i] = OccurrenceEndingAfter(y.windows[i], from, from - y.epoch_ns);
    uint32_t k = i;
    for (; k > 0 && open[order[k - 1]] > open[i]; --k) order[k] = order[k - 1];
    order[k] = static_cast<uint8_t>(i);
  }
  for (uint32_t k = 0; k < y.count; ++k) {
    const uint32_t i = order[k];
    c.open[k] = open[i];
    c.end[k] = open[i] + y.windows[i].window_ns;
    c.next[k] = open[i] + y.windows[i].period_ns;
    c.window[k] = static_cast<uint8_t>(i);
  }
  c.head = 0;
  c.count = y.count;
  c.from = from;
  c.built = true;
}

// Brings the cursor to `from` (>= c.from): the occurrences that ended (they opened before
// `from`: at the front, but for any still on) leave the ring and take their next one, in its
// place.
METRONOME_HD constexpr void Advance(const YieldSet& y, YieldCursor& c, int64_t from) {
  uint32_t k = 0;  // occurrences still on in front of the one looked at
  while (k < c.count) {
    const uint32_t at = Place(c, k);
    if (c.open[at] >= from) break;
    if (c.end[at] > from) {  // still on: stays
      ++k;
      continue;
    }
    const uint32_t i = c.window[at];
    const YieldWindow& w = y.windows[i];
    int64_t next = c.next[at];
    if (next + w.window_ns <= from) next = OccurrenceEndingAfter(w, from, from - y.epoch_ns);
    for (uint32_t m = k; m > 0; --m) MovePlace(c, Place(c, m), Place(c, m - 1));
    c.head = static_cast<uint8_t>(Place(c, 1));  // the ones still on closed the gap
    PlaceFromBack(y, c, i, next, c.count - 1);
  }
  c.from = from;
}

// Brings the cursor to `from` (ready for a search), building it if it follows no set yet, has
// another count, or stands after `from` (a clock step back).
METRONOME_HD constexpr void StandAt(const YieldSet& y, YieldCursor& c, int64_t from) {
  if (!c.built || c.count != y.count || from < c.from) {
    Build(y, c, from);
  } else {
    Advance(y, c, from);
  }
}

// One pass from `from` over the cursor's occurrences (standing at `from`) in the order they
// open (kSome: those of windows below `below` only), each that [t, t + span) meets moving t to
// its end: the earliest t in [from, limit] clear of them (as NextClearStart), kInt64Max when
// there is none, or kUndecided when the search reaches a window's next opening (a wait longer
// than the shortest period, or so): then NextClearStart itself answers.
inline constexpr int64_t kUndecided = kInt64Min;
template <bool kSome>
METRONOME_HD constexpr int64_t WalkOnce(const YieldCursor& c, uint32_t below, int64_t from,
                                        int64_t span, int64_t limit) {
  int64_t t = from;
  int64_t horizon = kInt64Max;  // the earliest next opening of a window passed
  for (uint32_t k = 0; k < c.count; ++k) {
    const uint32_t at = Place(c, k);
    if (kSome && c.window[at] >= below) continue;
    const int64_t open = c.open[at];
    if (open >= t + span) break;  // [t, t + span) ends before this and every later one opens
    if (open >= horizon) return t > limit ? kInt64Max : kUndecided;
    if (c.end[at] > t) t = c.end[at];
    if (c.next[at] < horizon) horizon = c.next[at];
  }
  if (t > limit) return kInt64Max;  // t only grew: past the limit at some step, past it now
  return t + span <= horizon ? t : kUndecided;
}

}  // namespace yield_detail

// NextClearStart through a cursor, which then stands at `from`: the same answer, sooner. One
// pass over the occurrences in the order they open usually decides; the search from scratch
// answers when it does not.
METRONOME_HD constexpr int64_t NextClearStart(const YieldSet& y, YieldCursor& c, int64_t from,
                                              int64_t need, int64_t limit) {
  if (!yield_detail::Searchable(y, from, limit)) return kInt64Max;
  if (y.count == 0) return from;
  yield_detail::StandAt(y, c, from);
  const int64_t t = yield_detail::WalkOnce<false>(c, y.count, from, need > 0 ? need : 1, limit);
  return t != yield_detail::kUndecided ? t : NextClearStart(y, from, need, limit);
}

// NextClearStart, through the cursor when there is one.
METRONOME_HD constexpr int64_t ClearStart(const YieldSet& y, YieldCursor* cursor, int64_t from,
                                          int64_t need, int64_t limit) {
  return cursor != nullptr ? NextClearStart(y, *cursor, from, need, limit)
                           : NextClearStart(y, from, need, limit);
}

namespace yield_detail {

// The first start in [start, limit] of a gap `need` long in the set's first k windows, the
// highest-ranked, for the largest k that has one (fewer than all: the caller tried those);
// kInt64Max when not even the first window leaves one. Leaving windows out only adds gaps, so
// a binary search finds k in at most four searches, each a pass over the cursor when the
// caller's stands at `start` (and that decides). Kept out of line: the gate's usual decision
// never comes here.
__attribute__((noinline)) METRONOME_HD constexpr int64_t ClearOfHighestRanked(
    const YieldSet& y, int64_t start, int64_t need, int64_t limit, const YieldCursor* cursor) {
  const bool standing = cursor != nullptr && cursor->built && cursor->count == y.count &&
                        cursor->from == start && Searchable(y, start, limit);
  uint32_t lo = 0;        // the most windows known to leave a gap (none always do)
  uint32_t hi = y.count;  // the fewest known not to
  int64_t found = kInt64Max;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    int64_t t =
        standing ? WalkOnce<true>(*cursor, mid, start, need > 0 ? need : 1, limit) : kUndecided;
    if (t == kUndecided) t = NextClearStart(y, start, need, limit, mid);
    if (t == kInt64Max) {
      hi = mid;
    } else {
      lo = mid;
      found = t;
    }
  }
  return found;
}

}  // namespace yield_detail

// Whether the rest of a phase, `rest` on the wire from `t`, may go on into the windows it meets:
// it ends at most the set's allowance past the opening of each (the occurrence of each window
// ending after t; one in which t lies counts from its opening, so that every part of a phase
// that went on finds the same end). Only a decision that would wait asks. A cursor standing at
// t (the gate's, after its search for a gap from t) has those occurrences in the order they
// open: the first usually decides. Without one, a multiplication per window.
METRONOME_HD constexpr bool AllowedToFinish(const YieldSet& y, int64_t t, int64_t rest,
                                            const YieldCursor* cursor = nullptr) {
  if (y.allowance_ns <= 0 || rest < 0 || rest > TimetableLimits{}.max_period_ns) return false;
  if (!yield_detail::Searchable(y, t, t)) return false;
  const int64_t end = t + rest;
  if (cursor != nullptr && cursor->built && cursor->count == y.count && cursor->from == t) {
    for (uint32_t k = 0; k < cursor->count; ++k) {
      const int64_t open = cursor->open[yield_detail::Place(*cursor, k)];
      if (open >= end) return true;  // this and every later one open after the end
      if (end - open > y.allowance_ns) return false;
    }
    return true;
  }
  for (uint32_t i = 0; i < y.count; ++i) {
    // An occurrence that opens at or after the end is not met (end − open ≤ 0).
    const int64_t open = OccurrenceEndingAfter(y.windows[i], t, t - y.epoch_ns);
    if (end - open > y.allowance_ns) return false;
  }
  return true;
}

// Where a transfer that may start at `start` (arriving at `now`) and needs `need` on the wire
// goes: `start` when the phase's `rest` (its own need and what follows it in the phase; -1:
// unknown) may finish there (AllowedToFinish); otherwise the first start of a gap `need` long
// (less the set's tolerance); failing that (within
// min(max_wait, cap) of now), the first start of a gap that long in the highest-ranked windows
// alone, for as many of them as leave one (the set lists them by rank), so that a transfer
// that must run into a window runs into the lowest-ranked one it can; failing that,
// the first start outside every window; failing that, `start`. With a cursor (the caller's,
// following this set) the same, sooner.
METRONOME_HD constexpr int64_t YieldedStart(const YieldSet& y, int64_t now, int64_t start,
                                            int64_t need, int64_t cap_ns,
                                            YieldCursor* cursor = nullptr, int64_t rest = -1) {
  need = need > y.tolerance_ns ? need - y.tolerance_ns : 0;
  const int64_t wait = y.max_wait_ns < cap_ns ? y.max_wait_ns : cap_ns;
  int64_t limit = SaturatingAdd(now, wait < 0 ? 0 : wait);
  if (limit < start) limit = start;
  int64_t t = ClearStart(y, cursor, start, need, limit);
  if (t != start && AllowedToFinish(y, start, rest, cursor)) return start;
  if (t == kInt64Max) t = yield_detail::ClearOfHighestRanked(y, start, need, limit, cursor);
  if (t == kInt64Max) t = ClearStart(y, cursor, start, 0, limit);
  return t == kInt64Max ? start : t;
}

// The share of a phase's need that one of its collectives has: need · bytes / phase_bytes
// (the whole need when either is unknown).
METRONOME_HD constexpr int64_t CollectiveNeed(const YieldSet& y, uint64_t bytes,
                                              uint64_t phase_bytes) {
  if (bytes == 0 || phase_bytes == 0 || bytes >= phase_bytes) return y.need_ns;
  return static_cast<int64_t>(static_cast<double>(y.need_ns) * static_cast<double>(bytes) /
                              static_cast<double>(phase_bytes));
}

// How long a job's collectives have lately taken per byte, from their release by the gate to
// their end (an exponential average): with the traffic it now shares the link with, the next
// one takes about as long. The scheduler's need (its wire time, stretched by the sharing it
// expects) is the floor; a job that finds the link more crowded than that waits for longer gaps.
struct WirePace {
  double ns_per_byte = 0.0;  // 0: nothing measured yet
};

METRONOME_HD constexpr void UpdatePace(WirePace& p, uint64_t bytes, int64_t duration_ns) {
  if (bytes == 0 || duration_ns <= 0) return;
  const double x = static_cast<double>(duration_ns) / static_cast<double>(bytes);
  p.ns_per_byte = p.ns_per_byte > 0.0 ? p.ns_per_byte + (x - p.ns_per_byte) * 0.25 : x;
}

// The gap a collective of `bytes` needs: its share of the scheduler's need, or what its pace
// says when that is longer (never more than the whole period's worth, kMaxPeriod).
METRONOME_HD constexpr int64_t PacedNeed(const YieldSet& y, const WirePace& p, uint64_t bytes,
                                         uint64_t phase_bytes) {
  const int64_t share = CollectiveNeed(y, bytes, phase_bytes);
  const double paced = p.ns_per_byte * static_cast<double>(bytes);
  if (!(paced > static_cast<double>(share))) return share;
  const double cap = static_cast<double>(TimetableLimits{}.max_period_ns);
  return static_cast<int64_t>(paced < cap ? paced : cap);
}

// The need of what is left of a phase from a collective of `bytes` on: PacedNeed of the bytes
// from its first to the phase's last (`phase_bytes` less `issued`, what the phase's collectives
// before it carried; at least its own); -1 when the phase's size is not known.
METRONOME_HD constexpr int64_t PhaseRest(const YieldSet& y, const WirePace& p, uint64_t bytes,
                                         uint64_t issued, uint64_t phase_bytes) {
  if (phase_bytes == 0) return -1;
  uint64_t left = issued < phase_bytes ? phase_bytes - issued : 0;
  if (left < bytes) left = bytes;
  return PacedNeed(y, p, left, phase_bytes);
}

// A decision `d` taken at `now`, held further for the higher-ranked windows: YieldedStart from
// the start `d` gives, for `need`. A decision the yield changed waits (kWaitUntil) and says so
// (GateDecision::yielded); its lateness stays `d`'s.
METRONOME_HD constexpr GateDecision ThenYield(GateDecision d, const YieldSet& y, int64_t now,
                                              int64_t need, int64_t cap_ns,
                                              YieldCursor* cursor = nullptr, int64_t rest = -1) {
  if (y.count == 0) return d;
  const int64_t start = d.action == GateAction::kWaitUntil ? d.until_ns : now;
  const int64_t t = YieldedStart(y, now, start, need, cap_ns, cursor, rest);
  if (t == start) return d;
  d.action = GateAction::kWaitUntil;
  d.until_ns = t;
  d.yielded = true;
  return d;
}

// The ranked gate at a phase's start: the timetable's decision (DecideCappedGate), then the
// higher-ranked windows, for `need` (the whole phase's y.need_ns, or its first collective's
// share, CollectiveNeed / PacedNeed). `cursor`: the caller's, following tt's set (optional).
// `rest`: the whole phase's need (PhaseRest), or -1.
METRONOME_HD constexpr GateDecision DecideRankedGate(const Timetable& tt, const YieldSet& y,
                                                     int64_t now, int64_t cap_ns, bool realign,
                                                     int64_t need, YieldCursor* cursor = nullptr,
                                                     int64_t rest = -1) {
  return ThenYield(DecideCappedGate(tt, now, cap_ns, realign), y, now, need, cap_ns, cursor, rest);
}
METRONOME_HD constexpr GateDecision DecideRankedGate(const Timetable& tt, const YieldSet& y,
                                                     int64_t now, int64_t cap_ns,
                                                     bool realign = false) {
  return DecideRankedGate(tt, y, now, cap_ns, realign, y.need_ns);
}

// A collective inside a phase that its gate let go: it yields alone (no timetable), for its
// own `need`; `rest`: its need and that of the phase's collectives after it (PhaseRest), or -1.
METRONOME_HD constexpr GateDecision DecideYield(const YieldSet& y, int64_t now, int64_t need,
                                                int64_t cap_ns, YieldCursor* cursor = nullptr,
                                                int64_t rest = -1) {
  GateDecision go;
  go.until_ns = now;
  return ThenYield(go, y, now, need, cap_ns, cursor, rest);
}

}  // namespace metronome
