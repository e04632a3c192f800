#include "metronome/common/timetable.hpp"
#include "metronome/common/clock.hpp"

#include <gtest/gtest.h>

#include <random>

namespace metronome {
namespace {

Timetable Make(int64_t epoch, int64_t period, int64_t offset, int64_t window, int64_t slack,
               int64_t max_wait) {
  Timetable t;
  t.version = 1;
  t.epoch_ns = epoch;
  t.period_ns = period;
  t.offset_ns = offset;
  t.window_ns = window;
  t.late_slack_ns = slack;
  t.max_wait_ns = max_wait;
  return t;
}

TEST(TimetableValidate, AcceptsSaneTimetableUnchanged) {
  Timetable t = Make(1'000 * kMs, 100 * kMs, 10 * kMs, 30 * kMs, 5 * kMs, 100 * kMs);
  const Timetable before = t;
  EXPECT_EQ(ValidateTimetable(t), kTimetableOk);
  EXPECT_EQ(t.offset_ns, before.offset_ns);
  EXPECT_EQ(t.window_ns, before.window_ns);
  EXPECT_EQ(t.late_slack_ns, before.late_slack_ns);
  EXPECT_EQ(t.max_wait_ns, before.max_wait_ns);
}

TEST(TimetableValidate, RejectsZeroNegativeTinyAndHugePeriods) {
  for (int64_t p : {int64_t{0}, int64_t{-5}, int64_t{99'999}, kInt64Min, kInt64Max}) {
    Timetable t = Make(0, p, 0, 1, 0, 0);
    EXPECT_TRUE(ValidateTimetable(t) & kRejectPeriod) << p;
  }
}

TEST(TimetableValidate, RejectsEmptyWindowAndFarEpoch) {
  Timetable w = Make(0, 100 * kMs, 0, 0, 0, 0);
  EXPECT_TRUE(ValidateTimetable(w) & kRejectWindow);
  Timetable e = Make(kInt64Max, 100 * kMs, 0, kMs, 0, 0);
  EXPECT_TRUE(ValidateTimetable(e) & kRejectEpoch);
  Timetable n = Make(kInt64Min, 100 * kMs, 0, kMs, 0, 0);
  EXPECT_TRUE(ValidateTimetable(n) & kRejectEpoch);
}

TEST(TimetableValidate, ClampsWindowOffsetSlackAndWait) {
  Timetable t = Make(0, 100 * kMs, -30 * kMs, 250 * kMs, -1, kInt64Max);
  const uint32_t r = ValidateTimetable(t);
  EXPECT_EQ(r & kTimetableRejectMask, 0u);
  EXPECT_TRUE(r & kClampWindow);
  EXPECT_TRUE(r & kClampOffset);
  EXPECT_TRUE(r & kClampSlack);
  EXPECT_TRUE(r & kClampMaxWait);
  EXPECT_EQ(t.window_ns, 100 * kMs);
  EXPECT_EQ(t.offset_ns, 70 * kMs);
  EXPECT_EQ(t.late_slack_ns, 0);
  EXPECT_EQ(t.max_wait_ns, 100 * kMs);  // never more than one period

  Timetable huge = Make(0, 100 * kMs, kInt64Max, 10 * kMs, 200 * kMs, 5 * kMs);
  EXPECT_EQ(ValidateTimetable(huge) & kTimetableRejectMask, 0u);
  EXPECT_GE(huge.offset_ns, 0);
  EXPECT_LT(huge.offset_ns, 100 * kMs);
  EXPECT_EQ(huge.late_slack_ns, 90 * kMs);  // slack ends where the next window would start
}

TEST(TimetableValidate, CapsMaxWaitForLongPeriods) {
  Timetable t = Make(0, 3'600'000 * kMs, 0, kMs, 0, 3'600'000 * kMs);
  ValidateTimetable(t);
  EXPECT_EQ(t.max_wait_ns, TimetableLimits{}.max_wait_cap_ns);
}

TEST(TimetableMath, WindowsOpenAtEpochPlusOffsetPlusKPeriods) {
  Timetable t = Make(1'000 * kMs, 100 * kMs, 20 * kMs, 30 * kMs, 0, 0);
  ASSERT_EQ(ValidateTimetable(t), kTimetableOk);
  EXPECT_EQ(NextWindowStart(t, 1'000 * kMs), 1'020 * kMs);
  EXPECT_EQ(NextWindowStart(t, 1'020 * kMs), 1'020 * kMs);
  EXPECT_EQ(NextWindowStart(t, 1'020 * kMs + 1), 1'120 * kMs);
  EXPECT_EQ(NextWindowStart(t, 0), 20 * kMs);  // before the epoch, windows continue backwards
  EXPECT_TRUE(InWindow(t, 1'020 * kMs));
  EXPECT_TRUE(InWindow(t, 1'050 * kMs - 1));
  EXPECT_FALSE(InWindow(t, 1'050 * kMs));
  EXPECT_FALSE(InWindow(t, 1'119 * kMs));
  EXPECT_EQ(WindowOpenAtOrBefore(t, 1'119 * kMs), 1'020 * kMs);
}

TEST(GateDecision, GoesInsideSlackWaitsAfterItFailsOpenBeyondMaxWait) {
  // Windows open at 0, 100, 200 ms...; slack 5 ms; max wait 60 ms.
  Timetable t = Make(0, 100 * kMs, 0, 30 * kMs, 5 * kMs, 60 * kMs);
  ASSERT_EQ(ValidateTimetable(t), kTimetableOk);

  GateDecision on_time = DecideGate(t, 100 * kMs);
  EXPECT_EQ(on_time.action, GateAction::kGoNow);
  EXPECT_EQ(on_time.lateness_ns, 0);

  GateDecision slightly_late = DecideGate(t, 104 * kMs);
  EXPECT_EQ(slightly_late.action, GateAction::kGoNow);
  EXPECT_EQ(slightly_late.lateness_ns, 4 * kMs);

  // 10 ms late: past the slack, next window 90 ms away > max wait 60 ms -> fail open.
  GateDecision too_far = DecideGate(t, 110 * kMs);
  EXPECT_EQ(too_far.action, GateAction::kFailOpen);

  // 50 ms late: next window 50 ms away <= 60 ms -> wait for it.
  GateDecision wait = DecideGate(t, 150 * kMs);
  EXPECT_EQ(wait.action, GateAction::kWaitUntil);
  EXPECT_EQ(wait.until_ns, 200 * kMs);
}

// Under a cap on any wait (the shim's METRONOME_MAX_WAIT_MS; the simulator applies the default)
// the timetable's max_wait is capped, and a realignment that would wait past the cap fails open.
TEST(GateDecision, NoWaitIsLongerThanTheCap) {
  // Period 2 s, window 0.5 s, slack 50 ms, max wait 1.5 s.
  Timetable t = Make(0, 2'000 * kMs, 0, 500 * kMs, 50 * kMs, 1'500 * kMs);
  ASSERT_EQ(ValidateTimetable(t), kTimetableOk);
  // 1.2 s to the next window: within max_wait, past the 1 s cap.
  EXPECT_EQ(DecideGate(t, 800 * kMs).action, GateAction::kWaitUntil);
  EXPECT_EQ(DecideCappedGate(t, 800 * kMs, kDefaultMaxWaitCapNs).action, GateAction::kFailOpen);
  // A late phase 1.9 s from its next window: realigning would wait past the cap.
  const GateDecision uncapped = DecideGate(t, 100 * kMs, true);
  EXPECT_TRUE(uncapped.realigned);
  const GateDecision capped = DecideCappedGate(t, 100 * kMs, kDefaultMaxWaitCapNs, true);
  EXPECT_EQ(capped.action, GateAction::kFailOpen);
  EXPECT_FALSE(capped.realigned);
  // One 0.9 s from its window realigns under the cap as without it.
  const GateDecision near = DecideCappedGate(t, 1'100 * kMs, kDefaultMaxWaitCapNs, true);
  EXPECT_EQ(near.action, GateAction::kWaitUntil);
  EXPECT_EQ(near.until_ns, 2'000 * kMs);
}

// A late phase waits for its next window even past max_wait (it realigns); a late phase within
// kRealignSpacing phases of that fails open, as the timetable may not fit the job; after that
// many phases a late one realigns again.
TEST(GateDecision, RealignsALatePhaseAtMostOnceInSoManyPhases) {
  // Period 100 ms, window 30 ms, slack 5 ms, max wait 70 ms: 10 ms late means a 90 ms wait.
  Timetable t = Make(0, 100 * kMs, 0, 30 * kMs, 5 * kMs, 70 * kMs);
  ASSERT_EQ(ValidateTimetable(t), kTimetableOk);
  const auto late_at = [](int k) { return int64_t{k} * 100 * kMs + 10 * kMs; };
  GateMemory m;
  ASSERT_TRUE(MustRealign(m));  // nothing realigned yet
  const GateDecision first = DecideGate(t, late_at(1), MustRealign(m));
  EXPECT_EQ(first.action, GateAction::kWaitUntil);
  EXPECT_EQ(first.until_ns, 200 * kMs);
  EXPECT_TRUE(first.realigned);
  Remember(m, first.realigned);
  for (int k = 2; k < 2 + static_cast<int>(kRealignSpacing); ++k) {
    ASSERT_FALSE(MustRealign(m)) << k;
    const GateDecision late = DecideGate(t, late_at(k), MustRealign(m));
    EXPECT_EQ(late.action, GateAction::kFailOpen) << k;
    EXPECT_FALSE(late.realigned) << k;
    Remember(m, late.realigned);
  }
  ASSERT_TRUE(MustRealign(m));
  // Within the slack it goes at once, and an early arrival waits as always: neither realigns.
  const GateDecision on_time = DecideGate(t, 1'003 * kMs, true);
  EXPECT_EQ(on_time.action, GateAction::kGoNow);
  const GateDecision early = DecideGate(t, 1'095 * kMs, true);
  EXPECT_EQ(early.action, GateAction::kWaitUntil);
  EXPECT_FALSE(early.realigned);
  Remember(m, early.realigned);
  const GateDecision again = DecideGate(t, late_at(11), MustRealign(m));
  EXPECT_EQ(again.action, GateAction::kWaitUntil);
  EXPECT_TRUE(again.realigned);
  Remember(m, again.realigned);
  EXPECT_FALSE(MustRealign(m));
}

// The planner's "no gate" is a window as long as the period (or, before validation clamps it,
// longer). Such a timetable never holds a phase and never calls one late, wherever in the period
// it arrives, whether or not the gate memory asks to realign, under any wait cap; before this
// rule every arrival past the (zero) slack counted as late and one in kRealignSpacing waited a
// period for its "next window".
TEST(GateDecision, AnAlwaysOpenTimetableNeverHoldsAPhase) {
  for (const int64_t window : {490 * kMs, 700 * kMs}) {
    Timetable t = Make(123 * kMs, 490 * kMs, 17 * kMs, window, 0, 0);
    ASSERT_EQ(ValidateTimetable(t) & kTimetableRejectMask, 0u);
    ASSERT_TRUE(AlwaysOpen(t));
    GateMemory m;
    for (int64_t now = 0; now < int64_t{3} * 490 * kMs; now += 7 * kMs + 13) {
      for (const bool realign : {false, true, MustRealign(m)}) {
        const GateDecision d = DecideGate(t, now, realign);
        ASSERT_EQ(d.action, GateAction::kGoNow) << now;
        EXPECT_EQ(d.until_ns, now);
        EXPECT_EQ(d.lateness_ns, 0);
        EXPECT_FALSE(d.realigned);
        const GateDecision capped = DecideCappedGate(t, now, kDefaultMaxWaitCapNs, realign);
        EXPECT_EQ(capped.action, GateAction::kGoNow);
        EXPECT_EQ(capped.lateness_ns, 0);
        Remember(m, capped.realigned);
      }
    }
  }
  // One nanosecond shorter and it is a gate again: an arrival past the slack is late.
  Timetable gated = Make(0, 490 * kMs, 0, 490 * kMs - 1, 0, 0);
  ASSERT_EQ(ValidateTimetable(gated), kTimetableOk);
  EXPECT_FALSE(AlwaysOpen(gated));
  EXPECT_EQ(DecideGate(gated, 100 * kMs).action, GateAction::kFailOpen);
}

TEST(GateDecision, ZeroMaxWaitNeverWaits) {
  Timetable t = Make(0, 100 * kMs, 0, 30 * kMs, 0, 0);
  ASSERT_EQ(ValidateTimetable(t), kTimetableOk);
  EXPECT_EQ(DecideGate(t, 99 * kMs).action, GateAction::kFailOpen);
  EXPECT_EQ(DecideGate(t, 100 * kMs).action, GateAction::kGoNow);
}

// Random timetables, including absurd raw values, and random instants across the whole int64
// range: validated timetables obey the invariants, and the math never overflows (UBSan checks
// signed overflow in the sanitizer build).
class TimetableProperty : public ::testing::Test {
 protected:
  std::mt19937_64 rng_{12345};

  int64_t AnyI64() {
    switch (rng_() % 4) {
      case 0:
        return static_cast<int64_t>(rng_());  // anything
      case 1:
        return kInt64Max - static_cast<int64_t>(rng_() % 1'000'000);  // near the top
      case 2:
        return kInt64Min + static_cast<int64_t>(rng_() % 1'000'000);  // near the bottom
      default:
        return static_cast<int64_t>(rng_() % (4'000'000 * kMs)) - 2'000'000 * kMs;
    }
  }

  Timetable RandomValid() {
    for (;;) {
      Timetable t;
      t.epoch_ns = (rng_() % 2) ? AnyI64() : static_cast<int64_t>(rng_() % (int64_t{1} << 61));
      t.period_ns =
          (rng_() % 3) ? static_cast<int64_t>(100'000 + rng_() % (10'000 * kMs)) : AnyI64();
      t.offset_ns = AnyI64();
      t.window_ns = (rng_() % 3) ? static_cast<int64_t>(1 + rng_() % (5'000 * kMs)) : AnyI64();
      t.late_slack_ns = AnyI64();
      t.max_wait_ns = AnyI64();
      if ((ValidateTimetable(t) & kTimetableRejectMask) == 0) return t;
    }
  }
};

TEST_F(TimetableProperty, ValidatedFieldsStayInRange) {
  for (int i = 0; i < 20'000; ++i) {
    Timetable t = RandomValid();
    ASSERT_GT(t.period_ns, 0);
    ASSERT_GE(t.offset_ns, 0);
    ASSERT_LT(t.offset_ns, t.period_ns);
    ASSERT_GT(t.window_ns, 0);
    ASSERT_LE(t.window_ns, t.period_ns);
    ASSERT_GE(t.late_slack_ns, 0);
    ASSERT_LE(t.late_slack_ns, t.period_ns - t.window_ns);
    ASSERT_GE(t.max_wait_ns, 0);
    ASSERT_LE(t.max_wait_ns, t.period_ns);
    // Validation is idempotent: a validated timetable passes unchanged.
    Timetable again = t;
    ASSERT_EQ(ValidateTimetable(again), kTimetableOk);
  }
}

TEST_F(TimetableProperty, NextWindowStartIsAtOrAfterAndWithinOnePeriod) {
  for (int i = 0; i < 50'000; ++i) {
    const Timetable t = RandomValid();
    const int64_t now = AnyI64();
    const int64_t next = NextWindowStart(t, now);
    ASSERT_GE(next, now);
    if (now <= kInt64Max - t.period_ns) {
      ASSERT_LT(next, now + t.period_ns);
      ASSERT_TRUE(InWindow(t, next));
      // It is a window start: one nanosecond earlier is in the previous period's tail or window.
      ASSERT_EQ(WindowOpenAtOrBefore(t, next), next);
    } else {
      // The next window may lie beyond INT64_MAX: then the answer saturates.
      ASSERT_TRUE(next == kInt64Max || WindowOpenAtOrBefore(t, next) == next);
    }
  }
}

TEST_F(TimetableProperty, DecisionsNeverWaitBeyondMaxWait) {
  for (int i = 0; i < 50'000; ++i) {
    const Timetable t = RandomValid();
    const int64_t now = AnyI64();
    const GateDecision d = DecideGate(t, now);
    switch (d.action) {
      case GateAction::kGoNow:
        ASSERT_LE(d.lateness_ns, t.late_slack_ns);
        ASSERT_EQ(d.until_ns, now);
        break;
      case GateAction::kWaitUntil:
        ASSERT_GT(d.until_ns, now);
        ASSERT_LE(d.until_ns - now, t.max_wait_ns);
        ASSERT_EQ(NextWindowStart(t, d.until_ns), d.until_ns);
        break;
      case GateAction::kFailOpen:
        ASSERT_EQ(d.until_ns, now);
        ASSERT_GT(d.lateness_ns, t.late_slack_ns);
        break;
    }
    ASSERT_GE(d.lateness_ns, 0);
    ASSERT_LT(d.lateness_ns, t.period_ns);
  }
}

}  // namespace
}  // namespace metronome
