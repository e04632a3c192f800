// Leader election on a Lease against the fake API server: who holds it, when a standby may take
// it, a release, and a leader that cannot renew.
#include <gtest/gtest.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <thread>

#include "fake_apiserver.hpp"
#include "metronome/kube/client.hpp"
#include "metronome/kube/leader_election.hpp"

namespace metronome::kube {
namespace {

using namespace std::chrono_literals;
using testing::ClientConfigFor;
using testing::FakeApiServer;

LeaderElectionConfig Election(const std::string& identity) {
  LeaderElectionConfig c;
  c.namespace_name = "metronome-system";
  c.identity = identity;
  c.lease_duration = 1'000ms;
  c.renew_deadline = 600ms;
  c.retry_period = 100ms;
  return c;
}

std::string Holder(const FakeApiServer& api) {
  const auto lease = api.Object("leases", "metronome-system", "metronome-scheduler");
  return lease ? (*lease)["spec"].value("holderIdentity", "") : "";
}

TEST(LeaderElection, ConfigurationMustLetTheLeaderStopBeforeAStandbyStarts) {
  EXPECT_EQ(CheckLeaderElection(Election("a")), "");
  LeaderElectionConfig c = Election("a");
  c.renew_deadline = c.lease_duration;
  EXPECT_NE(CheckLeaderElection(c), "");
  c = Election("a");
  c.retry_period = c.renew_deadline;
  EXPECT_NE(CheckLeaderElection(c), "");
  c = Election("");
  EXPECT_NE(CheckLeaderElection(c), "");
  c = Election("a");
  c.lease_duration = 500ms;
  c.renew_deadline = 300ms;
  EXPECT_NE(CheckLeaderElection(c), "") << "the Lease holds whole seconds";
  EXPECT_EQ(MicroTime(std::chrono::system_clock::time_point(1'764'000'000'123'456us)),
            "2025-11-24T16:00:00.123456Z");
}

TEST(LeaderElection, TheFirstTakesTheLeaseTheSecondWaitsUntilItExpires) {
  FakeApiServer api;
  Client ca(ClientConfigFor(api)), cb(ClientConfigFor(api));
  LeaderElector a(ca, Election("a")), b(cb, Election("b"));

  auto got = a.TryAcquireOrRenew();
  ASSERT_TRUE(got.Ok()) << got.GetError().ToString();
  EXPECT_TRUE(*got);
  EXPECT_EQ(Holder(api), "a");
  const auto lease = *api.Object("leases", "metronome-system", "metronome-scheduler");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 0);

  // While a renews, b never takes it.
  for (int i = 0; i < 15; ++i) {
    ASSERT_TRUE(*a.TryAcquireOrRenew());
    auto r = b.TryAcquireOrRenew();
    ASSERT_TRUE(r.Ok());
    EXPECT_FALSE(*r) << "try " << i;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(Holder(api), "a");

  // a stops renewing: b takes over one lease duration after it last saw the record change.
  const auto stopped = std::chrono::steady_clock::now();
  while (!*b.TryAcquireOrRenew()) std::this_thread::sleep_for(50ms);
  const auto waited = std::chrono::steady_clock::now() - stopped;
  EXPECT_GE(waited, 900ms);
  EXPECT_LE(waited, 1'600ms);
  EXPECT_EQ(Holder(api), "b");
  EXPECT_EQ((*api.Object("leases", "metronome-system",
                         "metronome-scheduler"))["spec"]["leaseTransitions"],
            1);
  // a, back, finds b's lease and stays standby.
  auto back = a.TryAcquireOrRenew();
  ASSERT_TRUE(back.Ok());
  EXPECT_FALSE(*back);
}

TEST(LeaderElection, AReleasedLeaseIsTakenAtTheNextTry) {
  FakeApiServer api;
  Client ca(ClientConfigFor(api)), cb(ClientConfigFor(api));
  LeaderElector a(ca, Election("a")), b(cb, Election("b"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  EXPECT_FALSE(*b.TryAcquireOrRenew());
  ASSERT_TRUE(a.Release().Ok());
  EXPECT_EQ(Holder(api), "");
  EXPECT_TRUE(*b.TryAcquireOrRenew());
  EXPECT_EQ(Holder(api), "b");
  // Releasing a lease one does not hold changes nothing.
  ASSERT_TRUE(a.Release().Ok());
  EXPECT_EQ(Holder(api), "b");
}

TEST(LeaderElection, AcquireWaitsAndStopsWhenAsked) {
  FakeApiServer api;
  Client ca(ClientConfigFor(api)), cb(ClientConfigFor(api));
  LeaderElector a(ca, Election("a")), b(cb, Election("b"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    stop.request_stop();
  });
  EXPECT_FALSE(b.Acquire(stop.get_token())) << "a's lease is fresh: b must not lead";
  stopper.join();
}

TEST(LeaderElection, ALeaderThatCannotRenewGivesUpWithinTheRenewDeadline) {
  FakeApiServer api;
  ClientConfig cfg = ClientConfigFor(api);
  cfg.max_attempts = 1;
  Client ca(cfg);
  LeaderElector a(ca, Election("a"));
  EXPECT_FALSE(a.WithinRenewDeadline()) << "never written";
  const auto start = std::chrono::steady_clock::now();  // no later than the write was sent
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  EXPECT_TRUE(a.WithinRenewDeadline());
  api.FailNext(1000, 503);
  std::stop_source never;
  EXPECT_FALSE(a.Renew(never.get_token()));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 600ms);
  EXPECT_LT(took, 1'000ms) << "it must stop before the lease expires for the others";
  EXPECT_FALSE(a.WithinRenewDeadline());
}

TEST(LeaderElection, ALeaderThatFindsAnotherHolderGivesUp) {
  FakeApiServer api;
  Client ca(ClientConfigFor(api));
  LeaderElector a(ca, Election("a"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  auto lease = *api.Object("leases", "metronome-system", "metronome-scheduler");
  lease["spec"]["holderIdentity"] = "intruder";
  api.Put("leases", "metronome-system", lease);
  std::stop_source never;
  EXPECT_FALSE(a.Renew(never.get_token()));
}

// A lease record with fields of the wrong type (a broken server or proxy, or a hand edit) is
// renewed over, not a throw out of the elector.
TEST(LeaderElection, ALeaseWithFieldsOfTheWrongTypeIsRenewedOver) {
  FakeApiServer api;
  Client ca(ClientConfigFor(api));
  LeaderElector a(ca, Election("a"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  auto lease = *api.Object("leases", "metronome-system", "metronome-scheduler");
  lease["spec"]["acquireTime"] = 5;
  lease["spec"]["leaseTransitions"] = "many";
  api.Put("leases", "metronome-system", lease);
  const auto renewed = a.TryAcquireOrRenew();
  ASSERT_TRUE(renewed.Ok()) << renewed.GetError().ToString();
  EXPECT_TRUE(*renewed);
  EXPECT_TRUE(
      (*api.Object("leases", "metronome-system", "metronome-scheduler"))["spec"]["acquireTime"]
          .is_string());
}

}  // namespace
}  // namespace metronome::kube
