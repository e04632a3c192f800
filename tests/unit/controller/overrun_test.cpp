#include "metronome/controller/overrun.hpp"
#include "metronome/common/clock.hpp"

#include <gtest/gtest.h>

namespace metronome::controller {
namespace {

constexpr double kRatio = kDefaultOverrunRatio;

// 100 ms window: phases of 111 ms widen it, 110 ms do not (the ratio is strict).
TEST(Overrun, PhasesLongerThanTheWindowByTheRatioWidenIt) {
  EXPECT_EQ(JudgeOverrun({111 * kMs, 100 * kMs, true, 0, 0}, kRatio), OverrunMove::kWiden);
  EXPECT_EQ(JudgeOverrun({110 * kMs, 100 * kMs, true, 0, 0}, kRatio), OverrunMove::kNone);
  // Only a protected window: a best-effort or always-open one has nothing to widen.
  EXPECT_EQ(JudgeOverrun({200 * kMs, 100 * kMs, false, 0, 0}, kRatio), OverrunMove::kNone);
}

// A refused widening to 150 ms is asked for again only by phases over 165 ms.
TEST(Overrun, ARefusedWideningNeedsPhasesLongerThanTheRefusedWindow) {
  EXPECT_EQ(JudgeOverrun({160 * kMs, 100 * kMs, true, 150 * kMs, 0}, kRatio), OverrunMove::kNone);
  EXPECT_EQ(JudgeOverrun({166 * kMs, 100 * kMs, true, 150 * kMs, 0}, kRatio), OverrunMove::kWiden);
}

// A window widened to 150 ms follows the phases down only below 150 / 1.21 ≈ 124 ms: a band.
TEST(Overrun, AWidenedWindowNarrowsOnlyBelowTheBand) {
  EXPECT_EQ(JudgeOverrun({130 * kMs, 150 * kMs, true, 0, 150 * kMs}, kRatio), OverrunMove::kNone);
  EXPECT_EQ(JudgeOverrun({120 * kMs, 150 * kMs, true, 0, 150 * kMs}, kRatio), OverrunMove::kNarrow);
  // It narrows whether or not the window is still protected (the floor stays a floor).
  EXPECT_EQ(JudgeOverrun({120 * kMs, 150 * kMs, false, 0, 150 * kMs}, kRatio),
            OverrunMove::kNarrow);
}

TEST(Overrun, ARatioOfZeroTurnsTheRuleOff) {
  EXPECT_EQ(JudgeOverrun({500 * kMs, 100 * kMs, true, 0, 0}, 0.0), OverrunMove::kNone);
  EXPECT_EQ(JudgeOverrun({1 * kMs, 100 * kMs, true, 0, 150 * kMs}, 0.0), OverrunMove::kNone);
}

}  // namespace
}  // namespace metronome::controller
