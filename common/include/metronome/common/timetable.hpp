// Timetable math: when may a job's communication phase start?
//
// A timetable is what the scheduler gives one job. Window k opens at
//   epoch_ns + offset_ns + k * period_ns       (k any integer, in the scheduler's clock)
// and lasts window_ns. An arrival up to late_slack_ns after a window opened still goes; a later
// one waits for the next window, unless that wait would exceed max_wait_ns (then it fails open).
//
// This header is the single implementation of that math. It compiles as plain C++ for the shim's
// host gate, the scheduler and the simulator, and as __host__ __device__ code under nvcc for the
// device gate kernel, so it uses no library beyond <cstdint> and never overflows: every sum of
// two times saturates at the int64 limits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define METRONOME_HD __host__ __device__
#else
#define METRONOME_HD
#endif

namespace metronome {

inline constexpr int64_t kInt64Max = INT64_MAX;
inline constexpr int64_t kInt64Min = INT64_MIN;

struct Timetable {
  uint64_t version = 0;       // increases with every new plan for this job; 0 = none yet
  int64_t epoch_ns = 0;       // reference instant, scheduler clock (CLOCK_REALTIME ns)
  int64_t period_ns = 0;      // > 0
  int64_t offset_ns = 0;      // normalized into [0, period)
  int64_t window_ns = 0;      // in (0, period]
  int64_t late_slack_ns = 0;  // in [0, period - window]: the cushion after the window
  int64_t max_wait_ns = 0;    // in [0, period]: never hold a phase longer than this

  friend constexpr bool operator==(const Timetable&, const Timetable&) = default;
};

// Bounds that make a timetable sane. Values outside them are clamped or rejected.
struct TimetableLimits {
  int64_t min_period_ns = 100'000;              // 100 µs: nothing periodic is faster
  int64_t max_period_ns = 3'600'000'000'000;    // 1 h
  int64_t max_abs_epoch_ns = int64_t{1} << 62;  // keeps epoch + offset + period in range
  int64_t max_wait_cap_ns = 10'000'000'000;     // 10 s, whatever the scheduler says
};

// What ValidateTimetable did. Rejections make the timetable unusable (the caller keeps the one it
// had, or runs ungated); clamps adjust a field and keep it.
enum TimetableCheck : uint32_t {
  kTimetableOk = 0,
  kRejectPeriod = 1u << 0,   // period <= 0 or outside [min_period, max_period]
  kRejectWindow = 1u << 1,   // window <= 0
  kRejectEpoch = 1u << 2,    // |epoch| beyond max_abs_epoch
  kClampWindow = 1u << 8,    // window > period: clamped to period (always open)
  kClampOffset = 1u << 9,    // offset outside [0, period): reduced modulo period
  kClampSlack = 1u << 10,    // late slack outside [0, period - window]
  kClampMaxWait = 1u << 11,  // max wait outside [0, min(period, cap)]
};
inline constexpr uint32_t kTimetableRejectMask = 0xffu;

METRONOME_HD constexpr int64_t SaturatingAdd(int64_t a, int64_t b) {
  if (b > 0 && a > kInt64Max - b) return kInt64Max;
  if (b < 0 && a < kInt64Min - b) return kInt64Min;
  return a + b;
}

METRONOME_HD constexpr int64_t SaturatingSub(int64_t a, int64_t b) {
  if (b < 0 && a > kInt64Max + b) return kInt64Max;
  if (b > 0 && a < kInt64Min + b) return kInt64Min;
  return a - b;
}

// Floor modulo: result in [0, m) for m > 0, also for negative a.
METRONOME_HD constexpr int64_t FloorMod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

METRONOME_HD constexpr int64_t ClampI64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// Checks and repairs a timetable in place. Returns a mask of TimetableCheck bits; the timetable
// is usable iff (result & kTimetableRejectMask) == 0.
METRONOME_HD constexpr uint32_t ValidateTimetable(Timetable& t, const TimetableLimits& lim = {}) {
  uint32_t r = kTimetableOk;
  if (t.period_ns < lim.min_period_ns || t.period_ns > lim.max_period_ns) r |= kRejectPeriod;
  if (t.window_ns <= 0) r |= kRejectWindow;
  if (t.epoch_ns > lim.max_abs_epoch_ns || t.epoch_ns < -lim.max_abs_epoch_ns) r |= kRejectEpoch;
  if (r != kTimetableOk) return r;

  if (t.window_ns > t.period_ns) {
    t.window_ns = t.period_ns;
    r |= kClampWindow;
  }
  if (t.offset_ns < 0 || t.offset_ns >= t.period_ns) {
    t.offset_ns = FloorMod(t.offset_ns, t.period_ns);
    r |= kClampOffset;
  }
  const int64_t slack = ClampI64(t.late_slack_ns, 0, t.period_ns - t.window_ns);
  if (slack != t.late_slack_ns) {
    t.late_slack_ns = slack;
    r |= kClampSlack;
  }
  const int64_t wait_cap = t.period_ns < lim.max_wait_cap_ns ? t.period_ns : lim.max_wait_cap_ns;
  const int64_t wait = ClampI64(t.max_wait_ns, 0, wait_cap);
  if (wait != t.max_wait_ns) {
    t.max_wait_ns = wait;
    r |= kClampMaxWait;
  }
  return r;
}

// The functions below require a timetable that passed ValidateTimetable.

// How far t is into its period: (t - epoch - offset) mod period, in [0, period). Computed as
// (t mod p - base mod p) mod p so that it never overflows, however far t is from the epoch.
METRONOME_HD constexpr int64_t PhaseInPeriod(const Timetable& tt, int64_t t) {
  const int64_t base = tt.epoch_ns + tt.offset_ns;  // cannot overflow after validation
  return FloorMod(FloorMod(t, tt.period_ns) - FloorMod(base, tt.period_ns), tt.period_ns);
}

// Start of the latest window that opened at or before t (saturates at kInt64Min).
METRONOME_HD constexpr int64_t WindowOpenAtOrBefore(const Timetable& tt, int64_t t) {
  return SaturatingSub(t, PhaseInPeriod(tt, t));
}

// Start of the first window that opens at or after t: in [t, t + period) when representable,
// kInt64Max otherwise.
METRONOME_HD constexpr int64_t NextWindowStart(const Timetable& tt, int64_t t) {
  const int64_t phase = PhaseInPeriod(tt, t);
  return phase == 0 ? t : SaturatingAdd(t, tt.period_ns - phase);
}

// Whether t lies inside a window [open, open + window).
METRONOME_HD constexpr bool InWindow(const Timetable& tt, int64_t t) {
  return PhaseInPeriod(tt, t) < tt.window_ns;
}

// The scheduler's "no gate": a window as long as the period leaves no time outside it. Such a
// timetable never holds a phase and no phase under it is late (DecideGate).
METRONOME_HD constexpr bool AlwaysOpen(const Timetable& tt) {
  return tt.window_ns >= tt.period_ns;
}

enum class GateAction : uint8_t {
  kGoNow,      // inside the window's late slack: start at once
  kWaitUntil,  // hold until `until_ns` (the next window opens)
  kFailOpen,   // the next window is further than max_wait: start at once, and report it
};

struct GateDecision {
  GateAction action = GateAction::kGoNow;
  int64_t until_ns = 0;     // for kWaitUntil: when to release; otherwise `now`
  int64_t lateness_ns = 0;  // how long after the latest window opened the arrival came
  bool realigned = false;   // waits although the wait exceeds max_wait (asked to realign)
  bool yielded = false;     // waits for higher-ranked windows to pass (yield.hpp)
};

// The gate: what to do with a communication phase that wants to start at `now`. A phase later
// than the late slack goes at once (fails open) when the next window is further than max_wait,
// unless `realign` (MustRealign below): then it waits for the next window whatever max_wait.
// Under an always-open timetable every phase goes at once, on time (lateness 0), realign or not.
// This is the one gate decision: the shim's host gate, its stream-wait gate and its device
// kernel, and the simulator's gate all call it (through DecideCappedGate).
METRONOME_HD constexpr GateDecision DecideGate(const Timetable& tt, int64_t now,
                                               bool realign = false) {
  GateDecision d;
  d.until_ns = now;
  if (AlwaysOpen(tt)) return d;
  const int64_t phase = PhaseInPeriod(tt, now);
  d.lateness_ns = phase;
  if (phase <= tt.late_slack_ns) {
    d.action = GateAction::kGoNow;
    return d;
  }
  const int64_t wait = tt.period_ns - phase;  // in (0, period): until the next window opens
  if ((!realign && wait > tt.max_wait_ns) || now > kInt64Max - wait) {
    d.action = GateAction::kFailOpen;
    return d;
  }
  d.until_ns = now + wait;
  d.action = GateAction::kWaitUntil;
  d.realigned = wait > tt.max_wait_ns;
  return d;
}

// Whether the gate counts a decision as a late phase (the shim's `late` counter, reported to the
// scheduler): one that failed open, or one held to its next window although it came after its
// window opened (an early arrival, more than half a period before the opening, is not late).
METRONOME_HD constexpr bool CountsLate(const GateDecision& d, const Timetable& tt) {
  return d.action == GateAction::kFailOpen ||
         (d.action == GateAction::kWaitUntil && d.lateness_ns < tt.period_ns / 2);
}

// The shim's default cap on any gate wait (METRONOME_MAX_WAIT_MS).
inline constexpr int64_t kDefaultMaxWaitCapNs = 1'000'000'000;

// The gate under a cap on any wait, as the shim runs it: the timetable's max_wait is capped, and
// a realignment that would wait past the cap fails open instead (a training job never waits
// longer than its operator allows, whatever the timetable says).
METRONOME_HD constexpr GateDecision DecideCappedGate(const Timetable& tt, int64_t now,
                                                     int64_t cap_ns, bool realign = false) {
  Timetable t = tt;
  if (t.max_wait_ns > cap_ns) t.max_wait_ns = cap_ns;
  if (t.max_wait_ns < 0) t.max_wait_ns = 0;
  GateDecision d = DecideGate(t, now, realign);
  if (d.realigned && d.until_ns - now > cap_ns) {
    d.action = GateAction::kFailOpen;
    d.until_ns = now;
    d.realigned = false;
  }
  return d;
}

// What a gate remembers from one phase to the next: how many phases ago a late phase last
// waited for its window (saturating).
struct GateMemory {
  uint32_t since_realign = UINT32_MAX;
};

// At most one realignment in this many phases.
inline constexpr uint32_t kRealignSpacing = 4;

// Whether a late phase must wait for its next window rather than fail open. A phase that
// overran its window (on TCP a phase sometimes takes up to twice its wire time) makes the next
// arrival late; failing open then sends it into a neighbour's window, both phases take longer,
// the neighbour arrives late in turn, and the lateness travels round the link for many periods.
// Waiting once costs this job part of a period and keeps the others on their windows. But a
// job late again soon after a realignment more likely has a timetable that does not fit it
// (a period shorter than its iteration): it fails open, as before, until the scheduler's next
// plan, rather than lose a period every few iterations.
METRONOME_HD constexpr bool MustRealign(const GateMemory& m) {
  return m.since_realign >= kRealignSpacing;
}

// After each gated phase: whether its decision realigned (GateDecision::realigned).
METRONOME_HD constexpr void Remember(GateMemory& m, bool realigned) {
  if (realigned) {
    m.since_realign = 0;
  } else if (m.since_realign != UINT32_MAX) {
    ++m.since_realign;
  }
}

}  // namespace metronome
