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
