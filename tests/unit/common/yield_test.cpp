#include "metronome/common/yield.hpp"
#include "metronome/common/clock.hpp"

#include <gtest/gtest.h>

#include <random>

namespace metronome {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000 * kMs;  // a CLOCK_REALTIME reading (2023)

Timetable AlwaysOpenTimetable(int64_t period) {
  Timetable t;
  t.version = 1;
  t.epoch_ns = kEpoch;
  t.period_ns = period;
  t.window_ns = period;
  return t;
}

YieldSet Set(int64_t need, int64_t max_wait, std::initializer_list<YieldWindow> windows) {
  YieldSet y;
  y.epoch_ns = kEpoch;
  y.need_ns = need;
  y.max_wait_ns = max_wait;
  for (const YieldWindow& w : windows) y.windows[y.count++] = w;
  EXPECT_EQ(ValidateYieldSet(y) & kYieldRejectMask, 0u);
  return y;
}

// Whether [t, t + need) meets any window of the set (brute force over occurrences).
bool Meets(const YieldSet& y, int64_t t, int64_t need) {
  for (uint32_t i = 0; i < y.count; ++i) {
    const YieldWindow& w = y.windows[i];
    const int64_t base = y.epoch_ns + w.offset_ns;
    const int64_t k0 = (t - base) / w.period_ns - 2;
    for (int64_t k = k0; k < k0 + 6; ++k) {
      const int64_t open = base + k * w.period_ns;
      if (open < t + need && t < open + w.window_ns) return true;
    }
  }
  return false;
}

// `count` windows of unrelated periods (150 to 450 ms), each at any offset from `epoch` and a
// sixth of its period long; waits up to 2 s.
YieldSet UnrelatedWindows(std::mt19937_64& rng, int64_t epoch, int64_t need, uint32_t count) {
  std::uniform_int_distribution<int64_t> period(150 * kMs, 450 * kMs);
  YieldSet y;
  y.epoch_ns = epoch;
  y.need_ns = need;
  y.max_wait_ns = 2'000 * kMs;
  y.count = count;
  for (uint32_t i = 0; i < y.count; ++i) {
    const int64_t p = period(rng);
    y.windows[i] = {p, std::uniform_int_distribution<int64_t>(0, p - 1)(rng), p / 6};
  }
  EXPECT_EQ(ValidateYieldSet(y) & kYieldRejectMask, 0u);
  return y;
}

TEST(YieldValidate, RejectsWhatTheGateCannotUse) {
  YieldSet y;
  y.count = kMaxYieldWindows + 1;
  EXPECT_EQ(ValidateYieldSet(y), kRejectYieldCount);
  y = YieldSet{};
  y.count = 1;
  y.windows[0] = {100 * kMs, 0, 100 * kMs};  // no gap at all
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldWindow, 0u);
  y.windows[0] = {100 * kMs, 0, 0};
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldWindow, 0u);
  y.windows[0] = {10, 0, 5};  // faster than anything periodic
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldWindow, 0u);
  y.windows[0] = {100 * kMs, 0, 10 * kMs};
  y.need_ns = -1;
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldNeed, 0u);
  y.need_ns = 0;
  y.allowance_ns = -1;
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldNeed, 0u);
  y.allowance_ns = TimetableLimits{}.max_period_ns + 1;
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldNeed, 0u);
  y.allowance_ns = 0;
  y.epoch_ns = kInt64Max;
  EXPECT_NE(ValidateYieldSet(y) & kRejectYieldEpoch, 0u);
}

TEST(YieldValidate, NormalizesOffsetsAndCapsTheWait) {
  YieldSet y;
  y.epoch_ns = kEpoch;
  y.max_wait_ns = 1'000'000 * kMs;
  y.count = 1;
  y.windows[0] = {100 * kMs, -30 * kMs, 10 * kMs};
  const uint32_t r = ValidateYieldSet(y);
  EXPECT_EQ(r & kYieldRejectMask, 0u);
  EXPECT_NE(r & kClampYieldOffset, 0u);
  EXPECT_NE(r & kClampYieldWait, 0u);
  EXPECT_EQ(y.windows[0].offset_ns, 70 * kMs);
  EXPECT_EQ(y.max_wait_ns, TimetableLimits{}.max_wait_cap_ns);
}

// The service's default epoch is 0, the Unix epoch: taken from there, times of a real clock are
// far beyond what the gate's doubles hold exactly, and the gate yields to nothing (the set is
// stale to it). Moved to the clock, the same windows in time, and the gate yields to them.
TEST(YieldRebase, KeepsTheWindowsInTimeAndMakesAFarEpochUsable) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const YieldSet y = UnrelatedWindows(rng, 0, 20 * kMs, 1 + static_cast<uint32_t>(trial % 4));
    const int64_t now = kEpoch + std::uniform_int_distribution<int64_t>(0, 10'000 * kMs)(rng);
    ASSERT_TRUE(YieldSetDueForRebase(y, now));
    EXPECT_EQ(NextClearStart(y, now, y.need_ns, now + 2'000 * kMs), kInt64Max);  // stale to it
    YieldSet moved = y;
    ASSERT_TRUE(RebaseYieldSet(moved, now - 12'345));
    EXPECT_FALSE(YieldSetDueForRebase(moved, now));
    for (uint32_t i = 0; i < y.count; ++i) {
      EXPECT_EQ(moved.windows[i].period_ns, y.windows[i].period_ns);
      EXPECT_EQ(moved.windows[i].window_ns, y.windows[i].window_ns);
      EXPECT_GE(moved.windows[i].offset_ns, 0);
      EXPECT_LT(moved.windows[i].offset_ns, y.windows[i].period_ns);
    }
    for (int64_t t = now; t < now + 1'000 * kMs; t += 7 * kMs) {
      ASSERT_EQ(Meets(moved, t, 1), Meets(y, t, 1)) << "trial " << trial;
    }
    const int64_t start = NextClearStart(moved, now, y.need_ns, now + 2'000 * kMs);
    ASSERT_NE(start, kInt64Max);
    EXPECT_FALSE(Meets(y, start, y.need_ns)) << "trial " << trial;
    if (start > now) {
      EXPECT_TRUE(Meets(y, start - 1, y.need_ns)) << "trial " << trial;
    }
  }
  YieldSet y = Set(10 * kMs, 100 * kMs, {{280 * kMs, 0, 80 * kMs}});
  EXPECT_FALSE(RebaseYieldSet(y, y.epoch_ns));
  EXPECT_FALSE(RebaseYieldSet(y, kInt64Max));  // beyond any epoch a timetable may have
  EXPECT_EQ(y.epoch_ns, kEpoch);
  EXPECT_FALSE(YieldSetDueForRebase(kNoYields, kEpoch));
}

TEST(ChunkParts, SplitsWhatIsLargerThanTheChunkAndNoMoreThan64Times) {
  EXPECT_EQ(ChunkParts(25u << 20, 0), 1u);
  EXPECT_EQ(ChunkParts(4u << 20, 4u << 20), 1u);
  EXPECT_EQ(ChunkParts((4u << 20) + 1, 4u << 20), 2u);
  EXPECT_EQ(ChunkParts(25u << 20, 4u << 20), 7u);
  EXPECT_EQ(ChunkParts(uint64_t{1} << 40, kMinChunkBytes), kMaxChunkParts);
}

TEST(RankedGate, NoWindowsIsTheTimetablesDecision) {
  const Timetable tt = AlwaysOpenTimetable(100 * kMs);
  const YieldSet none;
  const GateDecision d = DecideRankedGate(tt, none, kEpoch + 5 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kGoNow);
  EXPECT_FALSE(d.yielded);
}

TEST(RankedGate, APhaseArrivingInsideAHigherWindowWaitsForItToClose) {
  // Higher-ranked window: [0, 80) ms of every 280 ms. Need 50 ms.
  const YieldSet y = Set(50 * kMs, 300 * kMs, {{280 * kMs, 0, 80 * kMs}});
  const GateDecision d =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 30 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_TRUE(d.yielded);
  EXPECT_EQ(d.until_ns, kEpoch + 80 * kMs);
}

TEST(RankedGate, APhaseThatWouldRunIntoTheNextWindowWaitsForTheGapAfterIt) {
  const YieldSet y = Set(50 * kMs, 400 * kMs, {{280 * kMs, 0, 80 * kMs}});
  // At 250 ms only 30 ms are left before the window at 280: wait until 360.
  const GateDecision d =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 250 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_EQ(d.until_ns, kEpoch + 360 * kMs);
  // At 100 ms the gap is long enough: go.
  const GateDecision go =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 100 * kMs, 1000 * kMs);
  EXPECT_EQ(go.action, GateAction::kGoNow);
  EXPECT_FALSE(go.yielded);
}

TEST(RankedGate, WithoutAGapLongEnoughInTimeItStillNeverStartsIntoAWindow) {
  // Need 250 ms but gaps are 200 ms: no gap ever fits; it waits only for the window to close.
  const YieldSet y = Set(250 * kMs, 400 * kMs, {{280 * kMs, 0, 80 * kMs}});
  const GateDecision d =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 10 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_EQ(d.until_ns, kEpoch + 80 * kMs);
  const GateDecision go =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 100 * kMs, 1000 * kMs);
  EXPECT_EQ(go.action, GateAction::kGoNow);
}

TEST(RankedGate, WithoutAGapClearOfEveryWindowItRunsIntoTheLowestRankedOne) {
  // The set lists the highest-ranked window first: [0, 80) ms of every 280 ms, then a lower-
  // ranked one, [100, 260). The gaps between them are 20 ms; the need is 60 ms.
  const YieldSet y =
      Set(60 * kMs, 300 * kMs, {{280 * kMs, 0, 80 * kMs}, {280 * kMs, 100 * kMs, 160 * kMs}});
  // At 260 ms the wire is clear of both, but a start there runs into the top window at 280:
  // the phase waits for that window to close and runs into the lower-ranked one instead.
  const GateDecision d =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 260 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_TRUE(d.yielded);
  EXPECT_EQ(d.until_ns, kEpoch + 360 * kMs);
  // Ranked the other way round, the same start runs into the lower-ranked short window only:
  // it goes at once.
  const YieldSet swapped =
      Set(60 * kMs, 300 * kMs, {{280 * kMs, 100 * kMs, 160 * kMs}, {280 * kMs, 0, 80 * kMs}});
  EXPECT_EQ(
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), swapped, kEpoch + 260 * kMs, 1000 * kMs)
          .action,
      GateAction::kGoNow);
}

// A phase whose rest would end within the allowance past a higher window's opening finishes
// instead of pausing for the whole window; each later part of it finds the same end.
TEST(RankedGate, APhaseEndingWithinTheAllowanceFinishesIntoTheWindow) {
  // [280, 360) ms of every 280 ms; parts of 3 ms; the phase may end 10 ms into a window.
  YieldSet y = Set(3 * kMs, 300 * kMs, {{280 * kMs, 0, 80 * kMs}});
  y.allowance_ns = 10 * kMs;
  const int64_t at = kEpoch + 278 * kMs;  // 2 ms before the window: the part alone does not fit
  // 11 ms left of the phase: it ends 9 ms into the window.
  EXPECT_EQ(DecideYield(y, at, 3 * kMs, 1000 * kMs, nullptr, 11 * kMs).action, GateAction::kGoNow);
  // Its next part, 4 ms later and inside the window, with 7 ms left: the same end.
  EXPECT_EQ(DecideYield(y, at + 4 * kMs, 3 * kMs, 1000 * kMs, nullptr, 7 * kMs).action,
            GateAction::kGoNow);
  // 13 ms left would end 11 ms into it: the part pauses for the whole window, as without one.
  GateDecision d = DecideYield(y, at, 3 * kMs, 1000 * kMs, nullptr, 13 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_EQ(d.until_ns, kEpoch + 360 * kMs);
  // A phase that would start well inside the window waits for it to close, however short.
  EXPECT_EQ(DecideYield(y, kEpoch + 300 * kMs, 3 * kMs, 1000 * kMs, nullptr, 3 * kMs).action,
            GateAction::kWaitUntil);
  // The rest unknown (-1), or no allowance: the part's own need decides.
  EXPECT_EQ(DecideYield(y, at, 3 * kMs, 1000 * kMs, nullptr, -1).until_ns, kEpoch + 360 * kMs);
  y.allowance_ns = 0;
  EXPECT_EQ(DecideYield(y, at, 3 * kMs, 1000 * kMs, nullptr, 11 * kMs).until_ns,
            kEpoch + 360 * kMs);
  // At a phase start the same: the timetable's decision, then the rest against the windows.
  y.allowance_ns = 10 * kMs;
  EXPECT_EQ(DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, at, 1000 * kMs, false, 3 * kMs,
                             nullptr, 11 * kMs)
                .action,
            GateAction::kGoNow);
}

// Every window the rest meets must leave it within the allowance, also one already on.
TEST(RankedGate, TheAllowanceHoldsForEveryWindowTheRestMeets) {
  // [280, 360) ms and [275, 280) ms of every 280 ms.
  YieldSet y = Set(3 * kMs, 300 * kMs, {{280 * kMs, 0, 80 * kMs}, {280 * kMs, 275 * kMs, 5 * kMs}});
  y.allowance_ns = 10 * kMs;
  // From 278 ms, 9 ms left: 7 ms past the first opening, but 12 ms past the second's (on since
  // 275 ms).
  EXPECT_FALSE(AllowedToFinish(y, kEpoch + 278 * kMs, 9 * kMs));
  y.count = 1;
  EXPECT_TRUE(AllowedToFinish(y, kEpoch + 278 * kMs, 9 * kMs));
  EXPECT_FALSE(AllowedToFinish(y, kEpoch + 278 * kMs, 13 * kMs));  // 11 ms past
  // A rest that meets no window is allowed (the gate goes anyway); garbage is not.
  EXPECT_TRUE(AllowedToFinish(y, kEpoch + 200 * kMs, 20 * kMs));
  EXPECT_FALSE(AllowedToFinish(y, kEpoch + 278 * kMs, -1));
  EXPECT_FALSE(AllowedToFinish(y, kInt64Max, 1 * kMs));
  EXPECT_FALSE(AllowedToFinish(y, kEpoch + 278 * kMs, kInt64Max));
}

TEST(PhaseRest, IsWhatIsLeftOfThePhaseFromThisCollectiveOn) {
  YieldSet y = Set(40 * kMs, 300 * kMs, {{280 * kMs, 0, 80 * kMs}});
  const WirePace none;
  EXPECT_EQ(PhaseRest(y, none, 10, 0, 100), 40 * kMs);   // the first of ten: all of it
  EXPECT_EQ(PhaseRest(y, none, 10, 70, 100), 12 * kMs);  // three tenths left
  EXPECT_EQ(PhaseRest(y, none, 10, 120, 100), 4 * kMs);  // past the estimate: its own share
  EXPECT_EQ(PhaseRest(y, none, 10, 0, 0), -1);           // the phase's size not known yet
  const WirePace slow{1e6};                              // 1 ms a byte: slower than the need
  EXPECT_EQ(PhaseRest(y, slow, 10, 70, 100), 30 * kMs);
}

TEST(RankedGate, NeverWaitsLongerThanItsMaxWaitOrTheCap) {
  const YieldSet y = Set(50 * kMs, 20 * kMs, {{280 * kMs, 0, 80 * kMs}});
  // Inside the window with 50 ms left of it, but max wait 20 ms: goes as the timetable says.
  const GateDecision d =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, kEpoch + 30 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kGoNow);
  const YieldSet patient = Set(50 * kMs, 400 * kMs, {{280 * kMs, 0, 80 * kMs}});
  const GateDecision capped =
      DecideRankedGate(AlwaysOpenTimetable(300 * kMs), patient, kEpoch + 30 * kMs, 10 * kMs);
  EXPECT_EQ(capped.action, GateAction::kGoNow);
}

TEST(RankedGate, UnrelatedPeriodsLeaveAGapThatMeetsNone) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t need = std::uniform_int_distribution<int64_t>(0, 40 * kMs)(rng);
    const YieldSet y = UnrelatedWindows(rng, kEpoch, need, 1 + static_cast<uint32_t>(trial % 4));
    const int64_t now = kEpoch + std::uniform_int_distribution<int64_t>(0, 10'000 * kMs)(rng);
    const GateDecision d = DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, now, 2'000 * kMs);
    const int64_t start = d.action == GateAction::kWaitUntil ? d.until_ns : now;
    ASSERT_GE(start, now);
    ASSERT_LE(start - now, 2'000 * kMs);
    if (d.yielded || d.action == GateAction::kGoNow) {
      // Whatever it chose starts outside every window; with the need met unless no gap was found.
      EXPECT_FALSE(Meets(y, start, 1)) << "trial " << trial;
    }
    if (NextClearStart(y, now, y.need_ns, now + 2'000 * kMs) == start) {
      EXPECT_FALSE(Meets(y, start, y.need_ns)) << "trial " << trial;
    }
  }
}

// The host gate's cursor is a cache: through it every decision is the one made from scratch
// (which the device kernel and the simulator make), over random sets of up to 16 windows (periods
// from 100 µs to 0.5 s, any duty; some windows opening with another, so that occurrences tie),
// needs, limits and arrival times, in time order with now and then a step back (a clock step:
// the cursor starts over), and with a new set under a new version.
TEST(YieldCursor, DecidesExactlyAsFromScratch) {
  std::mt19937_64 rng(11);
  const auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  YieldCursor c;
  uint64_t compared = 0, waited = 0, ranked = 0;
  for (uint64_t version = 1; version <= 3000; ++version) {
    YieldSet y;
    y.epoch_ns = kEpoch + uniform(-kEpoch / 2, kEpoch / 2);
    y.count = static_cast<uint32_t>(uniform(1, kMaxYieldWindows));
    y.need_ns = uniform(0, 100 * kMs);
    y.max_wait_ns = uniform(0, 2'000 * kMs);
    y.tolerance_ns = uniform(0, 2) == 0 ? uniform(0, 5 * kMs) : 0;
    y.allowance_ns = uniform(0, 1) == 0 ? uniform(0, 20 * kMs) : 0;
    for (uint32_t i = 0; i < y.count; ++i) {
      const int64_t p = uniform(version % 3 == 0 ? 100'000 : 50 * kMs, 500 * kMs);
      y.windows[i] = {p, uniform(0, p - 1), uniform(1, p - 1)};
      if (i > 0 && uniform(0, 4) == 0) {  // opens with an earlier window, for as long or not
        const YieldWindow& twin = y.windows[uniform(0, i - 1)];
        y.windows[i] = {twin.period_ns, twin.offset_ns, uniform(1, twin.period_ns - 1)};
      }
    }
    ASSERT_EQ(ValidateYieldSet(y) & kYieldRejectMask, 0u);
    FollowSet(c, version);
    Timetable tt = AlwaysOpenTimetable(uniform(100 * kMs, 400 * kMs));
    tt.version = version;
    int64_t now = y.epoch_ns + uniform(-10'000 * kMs, 10'000 * kMs);
    for (int call = 0; call < 50; ++call) {
      const int64_t need = uniform(0, 120 * kMs);
      const int64_t limit = now + uniform(0, 1'000 * kMs);
      const int64_t clear = NextClearStart(y, c, now, need, limit);
      ASSERT_EQ(clear, NextClearStart(y, now, need, limit))
          << "version " << version << " call " << call;
      // Standing at `now`, it answers the search in the highest-ranked windows alone too.
      const int64_t highest = yield_detail::ClearOfHighestRanked(y, now, need, limit, &c);
      ASSERT_EQ(highest, yield_detail::ClearOfHighestRanked(y, now, need, limit, nullptr))
          << "version " << version << " call " << call;
      ranked += clear == kInt64Max && highest != kInt64Max ? 1 : 0;
      // The cursor now stands at `now`: it answers AllowedToFinish as the windows themselves.
      const int64_t rest = need + uniform(0, 30 * kMs);
      ASSERT_EQ(AllowedToFinish(y, now, rest, &c), AllowedToFinish(y, now, rest))
          << "version " << version << " call " << call;
      const GateDecision fresh =
          DecideRankedGate(tt, y, now, 1'000 * kMs, false, need, nullptr, rest);
      const GateDecision cached = DecideRankedGate(tt, y, now, 1'000 * kMs, false, need, &c, rest);
      ASSERT_EQ(cached.action, fresh.action);
      ASSERT_EQ(cached.until_ns, fresh.until_ns) << "version " << version << " call " << call;
      ASSERT_EQ(DecideYield(y, now, need, 1'000 * kMs, &c, rest).until_ns,
                DecideYield(y, now, need, 1'000 * kMs, nullptr, rest).until_ns);
      waited += fresh.yielded ? 1 : 0;
      ++compared;
      now += uniform(0, 9) == 0 ? -uniform(0, 300 * kMs) : uniform(0, 300 * kMs);
    }
  }
  EXPECT_EQ(compared, 150'000u);
  EXPECT_GT(waited, compared / 4) << "the sets must make most arrivals yield";
  EXPECT_GT(ranked, compared / 100) << "and some find a gap in the highest-ranked windows only";
}

TEST(RankedGate, YieldsOnTopOfTheTimetablesOwnWait) {
  // Own timetable: window at 100 ms of every 300; a higher window [100, 130) of every 280 ms
  // (offset 100) sits on it. The phase waits for its window, then for the higher one to pass.
  Timetable tt;
  tt.version = 1;
  tt.epoch_ns = kEpoch;
  tt.period_ns = 300 * kMs;
  tt.offset_ns = 100 * kMs;
  tt.window_ns = 50 * kMs;
  tt.max_wait_ns = 250 * kMs;
  ASSERT_EQ(ValidateTimetable(tt) & kTimetableRejectMask, 0u);
  const YieldSet y = Set(10 * kMs, 250 * kMs, {{280 * kMs, 100 * kMs, 30 * kMs}});
  const GateDecision d = DecideRankedGate(tt, y, kEpoch + 60 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_TRUE(d.yielded);
  EXPECT_EQ(d.until_ns, kEpoch + 130 * kMs);
}

TEST(RankedGate, FarFromAnyClockItNeverOverflows) {
  const YieldSet y = Set(50 * kMs, 400 * kMs, {{280 * kMs, 0, 80 * kMs}});
  for (int64_t now : {kInt64Max - 1, kInt64Min + 1, int64_t{0}, kInt64Max / 2 + 1}) {
    const GateDecision d = DecideRankedGate(AlwaysOpenTimetable(300 * kMs), y, now, kInt64Max);
    EXPECT_GE(d.until_ns, now);
  }
}

}  // namespace
}  // namespace metronome
