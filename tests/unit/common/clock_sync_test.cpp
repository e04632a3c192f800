#include "metronome/common/clock_sync.hpp"

#include <gtest/gtest.h>

#include <random>

#include "metronome/common/clock.hpp"

namespace metronome {
namespace {

// One exchange against a server whose clock is client + skew, with the given one-way delays and
// server processing time.
ClockSample Exchange(int64_t t1, int64_t skew, int64_t up, int64_t down, int64_t proc = 5 * kUs) {
  ClockSample s;
  s.t1 = t1;
  s.t2 = t1 + up + skew;
  s.t3 = s.t2 + proc;
  s.t4 = t1 + up + proc + down;
  return s;
}

TEST(ClockSync, NoEstimateBeforeTheFirstSample) {
  ClockSync c;
  EXPECT_FALSE(c.HasEstimate());
  EXPECT_EQ(c.OffsetNs(), 0);
  EXPECT_EQ(c.DelayNs(), -1);
  EXPECT_EQ(c.ToServer(123), 123);
}

TEST(ClockSync, SymmetricDelayGivesTheExactSkew) {
  ClockSync c;
  ASSERT_TRUE(c.AddSample(Exchange(1'000'000, 250 * kUs, 40 * kUs, 40 * kUs)));
  EXPECT_EQ(c.OffsetNs(), 250 * kUs);
  EXPECT_EQ(c.DelayNs(), 80 * kUs);
  EXPECT_EQ(c.ToServer(0), 250 * kUs);
  EXPECT_EQ(c.ToClient(250 * kUs), 0);
}

TEST(ClockSync, AsymmetricDelayErrorStaysWithinHalfTheRoundTrip) {
  const int64_t skew = -3'000 * kUs;
  ClockSync c;
  ASSERT_TRUE(c.AddSample(Exchange(0, skew, 10 * kUs, 190 * kUs)));
  EXPECT_NE(c.OffsetNs(), skew);
  EXPECT_LE(std::abs(c.OffsetNs() - skew), c.ErrorBoundNs());
}

TEST(ClockSync, KeepsTheMinimumDelaySampleUnderQueueingNoise) {
  // Most exchanges suffer large, asymmetric queueing; a few are quick. The estimate must come
  // from a quick one and be close to the true skew.
  const int64_t skew = 777 * kUs;
  std::mt19937_64 rng(3);
  ClockSync c(32);
  int64_t t = 0;
  for (int i = 0; i < 32; ++i) {
    const bool quick = i % 10 == 3;
    const int64_t up = 20 * kUs + (quick ? 0 : static_cast<int64_t>(rng() % (2'000 * kUs)));
    const int64_t down = 20 * kUs + (quick ? 0 : static_cast<int64_t>(rng() % (200 * kUs)));
    ASSERT_TRUE(c.AddSample(Exchange(t, skew, up, down)));
    t += 100'000 * kUs;
  }
  EXPECT_EQ(c.DelayNs(), 40 * kUs);
  EXPECT_EQ(c.OffsetNs(), skew);
  EXPECT_EQ(c.Steps(), 0u);  // however asymmetric, every sample's interval holds the skew
}

TEST(ClockSync, ForgetsSamplesOutsideTheWindow) {
  ClockSync c(4);
  ASSERT_TRUE(c.AddSample(Exchange(0, 100 * kUs, 1 * kUs, 1 * kUs)));  // very quick, old skew
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(c.AddSample(Exchange(int64_t{1'000'000} * i, 900 * kUs, 50 * kUs, 50 * kUs)));
  }
  // The quick sample has left the window, so the new skew wins.
  EXPECT_EQ(c.OffsetNs(), 900 * kUs);
}

TEST(ClockSync, AStepReplacesTheSamplesAtOnce) {
  ClockSync c(16);
  int64_t t = 0;
  for (int i = 0; i < 8; ++i, t += 2'000 * kMs) {
    ASSERT_TRUE(c.AddSample(Exchange(t, 300 * kUs, 20 * kUs, 20 * kUs)));
  }
  // NTP steps the client's clock back by 50 ms: the server now reads 50 ms more ahead. One slow
  // sample is enough to see it; the quick old ones would otherwise win for 16 more pings.
  ASSERT_TRUE(c.AddSample(Exchange(t, 50'300 * kUs, 400 * kUs, 100 * kUs)));
  EXPECT_EQ(c.Steps(), 1u);
  EXPECT_LE(std::abs(c.OffsetNs() - 50'300 * kUs), c.ErrorBoundNs());
  t += 2'000 * kMs;
  ASSERT_TRUE(c.AddSample(Exchange(t, 50'300 * kUs, 20 * kUs, 20 * kUs)));
  EXPECT_EQ(c.OffsetNs(), 50'300 * kUs);
  EXPECT_EQ(c.Steps(), 1u);
}

TEST(ClockSync, DriftWithinTheAllowanceIsNoStep) {
  // The server's clock runs 200 ppm fast: over 16 pings 2 s apart the offset moves by 6.4 ms,
  // more than the slack, less than the drift allowed for the samples' distance.
  ClockSync c(16);
  for (int64_t i = 0; i < 32; ++i) {
    const int64_t t = i * 2'000 * kMs;
    ASSERT_TRUE(c.AddSample(Exchange(t, t / 1'000'000 * 200, 30 * kUs, 30 * kUs)));
  }
  EXPECT_EQ(c.Steps(), 0u);
  // A step beyond it is one (smaller steps age out of the window); 12.8 ms: 200 ppm of 64 s.
  ASSERT_TRUE(c.AddSample(Exchange(64'000 * kMs, 12'800 * kUs + 30 * kMs, 30 * kUs, 30 * kUs)));
  EXPECT_EQ(c.Steps(), 1u);
}

TEST(ClockSync, PingsQuicklyUntilSettledThenWithinTheSilenceBound) {
  EXPECT_EQ(ClockPingIntervalNs(0, kDefaultSilenceNs), 200 * kMs);
  EXPECT_EQ(ClockPingIntervalNs(kSettlingPings - 1, kDefaultSilenceNs), 200 * kMs);
  EXPECT_EQ(ClockPingIntervalNs(kSettlingPings, kDefaultSilenceNs), 2'000 * kMs);
  // A short silence bound keeps two pongs and a half in it; never below the settling pace.
  EXPECT_EQ(ClockPingIntervalNs(kSettlingPings, 2'000 * kMs), 800 * kMs);
  EXPECT_EQ(ClockPingIntervalNs(kSettlingPings, 100 * kMs), 200 * kMs);
  EXPECT_EQ(ClockPingIntervalNs(kSettlingPings, 600'000 * kMs), 2'000 * kMs);
}

TEST(ClockSync, RejectsInconsistentSamples) {
  ClockSync c;
  ClockSample back_in_time{100, 50, 60, 90};  // pong received before the ping was sent
  EXPECT_FALSE(c.AddSample(back_in_time));
  ClockSample server_backwards{0, 60, 50, 100};
  EXPECT_FALSE(c.AddSample(server_backwards));
  ClockSample absurd{INT64_MIN, INT64_MAX, INT64_MAX, INT64_MAX};
  EXPECT_FALSE(c.AddSample(absurd));
  ClockSample huge_skew{0, INT64_MAX - 10, INT64_MAX - 5, 100};
  EXPECT_FALSE(c.AddSample(huge_skew));
  EXPECT_EQ(c.Rejected(), 4u);
  EXPECT_FALSE(c.HasEstimate());
}

}  // namespace
}  // namespace metronome
