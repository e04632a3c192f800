#include "metronome/common/turn.hpp"
#include "metronome/common/clock.hpp"

#include <gtest/gtest.h>

#include <random>

namespace metronome {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000 * kMs;  // a CLOCK_REALTIME reading (2023)

// A job with 100 ms on the wire and a 300 ms period, with one partner.
TurnSet OnePartner(bool higher, int64_t wire, int64_t compute, int64_t begun, int64_t ended) {
  TurnSet s;
  s.wire_ns = 100 * kMs;
  s.period_ns = 300 * kMs;
  s.count = 1;
  s.partners[0] = {7, higher, wire, compute, begun, ended};
  EXPECT_EQ(ValidateTurnSet(s), kTurnOk);
  return s;
}

constexpr int64_t kCap = kDefaultMaxWaitCapNs;

TEST(Turn, NoPartnerNoHold) {
  TurnSet s;
  s.wire_ns = 100 * kMs;
  s.period_ns = 300 * kMs;
  EXPECT_FALSE(DecideTurn(s, kT0, kT0, kCap, 0).hold);
}

TEST(Turn, HoldsForAHigherPartnerInAPhaseUntilItsBound) {
  // The partner began 10 ms ago and has not ended: hold, at most one own period from arrival.
  const TurnSet s = OnePartner(true, 400 * kMs, 50 * kMs, kT0 - 10 * kMs, kT0 - 200 * kMs);
  const TurnDecision d = DecideTurn(s, kT0, kT0, kCap, 0);
  EXPECT_TRUE(d.hold);
  EXPECT_FALSE(d.for_equal);
  EXPECT_EQ(d.until_ns, kT0 + 300 * kMs);
  // The wait cap bounds it too; at the bound the phase goes.
  EXPECT_EQ(DecideTurn(s, kT0, kT0, 120 * kMs, 0).until_ns, kT0 + 120 * kMs);
  EXPECT_FALSE(DecideTurn(s, kT0, kT0 + 300 * kMs, kCap, 0).hold);
  // Its phases in a row do not matter for a higher partner.
  EXPECT_TRUE(DecideTurn(s, kT0, kT0, kCap, 99).hold);
}

TEST(Turn, GoesWhenThePartnerIsSeenBetweenPhases) {
  EXPECT_FALSE(DecideTurn(OnePartner(true, 50 * kMs, 50 * kMs, kT0 - 90 * kMs, kT0 - 5 * kMs), kT0,
                          kT0, kCap, 0)
                   .hold);
  // Nothing seen yet.
  EXPECT_FALSE(DecideTurn(OnePartner(true, 50 * kMs, 50 * kMs, 0, 0), kT0, kT0, kCap, 0).hold);
}

TEST(Turn, AnEqualIsWaitedForOnlyWhenEveryClauseHolds) {
  // Partner: 150 ms on the wire, 100 ms compute, began 20 ms ago (rest 130 ms).
  const int64_t begun = kT0 - 20 * kMs;
  const TurnDecision d =
      DecideTurn(OnePartner(false, 150 * kMs, 100 * kMs, begun, 0), kT0, kT0, kCap, 0);
  EXPECT_TRUE(d.hold);
  EXPECT_TRUE(d.for_equal);
  // Rest > 2 W(j): a partner that began just now with 250 ms on the wire is not waited for.
  EXPECT_FALSE(DecideTurn(OnePartner(false, 250 * kMs, 200 * kMs, kT0, 0), kT0, kT0, kCap, 0).hold);
  // ... but the same phase 60 ms later (rest 190 ms) is.
  EXPECT_TRUE(
      DecideTurn(OnePartner(false, 250 * kMs, 200 * kMs, kT0 - 60 * kMs, 0), kT0, kT0, kCap, 0)
          .hold);
  // W(partner) > 4 W(j): a short phase does not queue behind a long one, however little is left.
  EXPECT_FALSE(
      DecideTurn(OnePartner(false, 401 * kMs, 200 * kMs, kT0 - 390 * kMs, 0), kT0, kT0, kCap, 0)
          .hold);
  // W(j) > 2 C(partner): the partner is back before this phase is done.
  EXPECT_FALSE(
      DecideTurn(OnePartner(false, 150 * kMs, 49 * kMs, begun, 0), kT0, kT0, kCap, 0).hold);
  EXPECT_TRUE(DecideTurn(OnePartner(false, 150 * kMs, 50 * kMs, begun, 0), kT0, kT0, kCap, 0).hold);
  // Three phases in a row held: the fourth goes.
  EXPECT_TRUE(
      DecideTurn(OnePartner(false, 150 * kMs, 100 * kMs, begun, 0), kT0, kT0, kCap, 2).hold);
  EXPECT_FALSE(
      DecideTurn(OnePartner(false, 150 * kMs, 100 * kMs, begun, 0), kT0, kT0, kCap, 3).hold);
}

TEST(Turn, APartnerSeenInAPhaseTooLongIsQuiet) {
  // Twice its natural period (50 + 50 ms) after its begin, its phase is taken as over: the hold
  // asks again then at the latest.
  const TurnSet s = OnePartner(true, 50 * kMs, 50 * kMs, kT0 - 150 * kMs, 0);
  const TurnDecision d = DecideTurn(s, kT0, kT0, kCap, 0);
  EXPECT_TRUE(d.hold);
  EXPECT_EQ(d.until_ns, kT0 + 50 * kMs);
  EXPECT_FALSE(DecideTurn(s, kT0, kT0 + 50 * kMs, kCap, 0).hold);
}

TEST(Turn, OnePartnerInATurnIsEnough) {
  TurnSet s = OnePartner(false, 150 * kMs, 100 * kMs, kT0 - 20 * kMs, 0);
  s.partners[1] = {8, true, 100 * kMs, 100 * kMs, kT0 - 50 * kMs, kT0 - 10 * kMs};  // between
  s.count = 2;
  ASSERT_EQ(ValidateTurnSet(s), kTurnOk);
  EXPECT_TRUE(DecideTurn(s, kT0, kT0, kCap, 0).hold);
  s.partners[0].ended_ns = kT0 - 1;
  EXPECT_FALSE(DecideTurn(s, kT0, kT0, kCap, 0).hold);
}

TEST(Turn, ValidationRejectsWhatTheDecisionCannotUse) {
  TurnSet s = OnePartner(false, 150 * kMs, 100 * kMs, 0, 0);
  s.count = kMaxTurnPartners + 1;
  EXPECT_EQ(ValidateTurnSet(s), kRejectTurnCount);
  s = OnePartner(false, 150 * kMs, 100 * kMs, 0, 0);
  s.partners[0].wire_ns = 0;
  EXPECT_EQ(ValidateTurnSet(s), kRejectTurnFigures);
  s = OnePartner(false, 150 * kMs, 100 * kMs, 0, 0);
  s.partners[0].compute_ns = -1;
  EXPECT_EQ(ValidateTurnSet(s), kRejectTurnFigures);
  s = OnePartner(false, 150 * kMs, 100 * kMs, 0, 0);
  s.period_ns = TimetableLimits{}.max_period_ns + 1;
  EXPECT_EQ(ValidateTurnSet(s), kRejectTurnFigures);
  s = OnePartner(false, 150 * kMs, 100 * kMs, 0, 0);
  s.wire_ns = -5;
  EXPECT_EQ(ValidateTurnSet(s), kRejectTurnFigures);
}

// Whatever a valid set and the times say, a hold ends within the job's bound and is for a
// partner seen in a phase; extreme times neither overflow nor hold forever.
TEST(Turn, AHoldIsAlwaysBoundedAndForAPartnerInAPhase) {
  std::mt19937_64 rng(12345);
  const int64_t max_period = TimetableLimits{}.max_period_ns;
  std::uniform_int_distribution<int64_t> len(1, max_period);
  std::uniform_int_distribution<int64_t> small(1, 2000 * kMs);
  std::uniform_int_distribution<int> pick(0, 9);
  const int64_t extremes[] = {kInt64Min, kInt64Min + 1, -1, 0, 1, kInt64Max - 1, kInt64Max};
  int holds = 0;
  for (int n = 0; n < 200'000; ++n) {
    auto some = [&]() { return pick(rng) == 0 ? len(rng) : small(rng); };
    auto time = [&]() {
      return pick(rng) == 0 ? extremes[static_cast<std::size_t>(pick(rng)) % 7]
                            : kT0 + small(rng) - small(rng);
    };
    TurnSet s;
    s.wire_ns = some();
    s.period_ns = some();
    s.count = static_cast<uint32_t>(pick(rng)) % (kMaxTurnPartners + 1);
    for (uint32_t i = 0; i < s.count; ++i) {
      s.partners[i] = {i, pick(rng) < 3, some(), some() - 1, time(), time()};
    }
    ASSERT_EQ(ValidateTurnSet(s), kTurnOk);
    const int64_t arrival = time();
    const int64_t now = pick(rng) < 5 ? arrival : time();
    const int64_t cap = pick(rng) == 0 ? kInt64Max : small(rng);
    const auto in_a_row = static_cast<uint32_t>(pick(rng)) % 5;
    const TurnDecision d = DecideTurn(s, arrival, now, cap, in_a_row);
    if (!d.hold) continue;
    ++holds;
    const int64_t longest = std::min(s.period_ns, cap);
    EXPECT_GT(d.until_ns, now);
    EXPECT_LE(d.until_ns, SaturatingAdd(arrival, longest));
    bool in_phase = false;
    for (uint32_t i = 0; i < s.count; ++i) {
      in_phase |= s.partners[i].begun_ns > s.partners[i].ended_ns;
    }
    EXPECT_TRUE(in_phase);
    // Asked again at its end, it does not hold on the same view past the bound.
    if (d.until_ns == SaturatingAdd(arrival, longest)) {
      EXPECT_FALSE(DecideTurn(s, arrival, d.until_ns, cap, in_a_row).hold);
    }
  }
  EXPECT_GT(holds, 1000);
}

// The decision is a constant expression (as the device compiles it).
static_assert(DecideTurn(TurnSet{100, 300, 1, {{1, true, 50, 50, 10, 5}}}, 0, 20, 1000, 0).hold);
static_assert(!DecideTurn(TurnSet{100, 300, 1, {{1, true, 50, 50, 10, 15}}}, 0, 20, 1000, 0).hold);

}  // namespace
}  // namespace metronome
