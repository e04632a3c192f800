// The HTTP server's per-client token buckets, on a clock the test moves.
#include "client_rate_limit.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace metronome::service {
namespace {

using namespace std::chrono_literals;
using Clock = ClientRateLimit::Clock;

int Allowed(ClientRateLimit& limit, const std::string& client, Clock::time_point t, int tries) {
  int ok = 0;
  for (int i = 0; i < tries; ++i) ok += limit.Allow(client, t) ? 1 : 0;
  return ok;
}

TEST(ClientRateLimit, ABurstOfTwiceTheRateThenTheRate) {
  ClientRateLimit limit(10);
  const Clock::time_point t0{};
  EXPECT_EQ(Allowed(limit, "10.0.0.1", t0, 50), 20) << "a new client has a full bucket";
  EXPECT_EQ(Allowed(limit, "10.0.0.1", t0 + 500ms, 50), 5) << "5 refilled in half a second";
  EXPECT_EQ(Allowed(limit, "10.0.0.2", t0 + 500ms, 50), 20) << "another client is not charged";
  EXPECT_EQ(Allowed(limit, "10.0.0.1", t0 + 100s, 50), 20) << "refill stops at the burst";
}

// A rate under one request in two seconds still lets a request through now and then (its bucket
// would otherwise never hold a whole one: every route 429 for good, the probes included).
TEST(ClientRateLimit, ASlowRateStillLetsOneThrough) {
  ClientRateLimit limit(0.4);
  const Clock::time_point t0{};
  EXPECT_EQ(Allowed(limit, "10.0.0.1", t0, 5), 1);
  EXPECT_EQ(Allowed(limit, "10.0.0.1", t0 + 1s, 5), 0);
  EXPECT_EQ(Allowed(limit, "10.0.0.1", t0 + 3s, 5), 1) << "2.5 s a request";
}

TEST(ClientRateLimit, TheTableStaysBoundedAndKeepsBusyClients) {
  ClientRateLimit limit(1);
  const Clock::time_point t0{};
  EXPECT_EQ(Allowed(limit, "busy", t0, 5), 2);
  for (std::size_t i = 1; i < ClientRateLimit::kMaxClients; ++i) {  // the table is full
    EXPECT_TRUE(limit.Allow("idle-" + std::to_string(i), t0 - 10s));
  }
  // A new address: the idle clients' buckets have refilled by t0 and go; the busy one's empty
  // bucket stays.
  EXPECT_TRUE(limit.Allow("newcomer", t0));
  EXPECT_FALSE(limit.Allow("busy", t0)) << "a flood of new addresses does not reset a busy one";
}

}  // namespace
}  // namespace metronome::service
