// Who takes turns with whom on the links two jobs share (turns.hpp).
#include "metronome/controller/turns.hpp"

#include <gtest/gtest.h>

#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "metronome/common/clock.hpp"

namespace metronome::controller {
namespace {

constexpr double kTenGbit = 10e9 / 8;  // bytes per second

// A 2-rank job that reduces `mb` MB a phase and computes `compute_ms` between phases.
JobState Measured(uint64_t id, int32_t priority, std::vector<std::string> links, double mb,
                  int64_t compute_ms) {
  JobState j;
  j.id = id;
  j.name = "job" + std::to_string(id);
  j.priority = priority;
  j.world_size = 2;
  j.links = std::move(links);
  j.has_profile = true;
  j.profile.bytes_per_phase = static_cast<uint64_t>(mb * 1e6);
  j.profile.compute_ns = compute_ms * kMs;
  // Its phases measured at 90 % of the link: it saturates it.
  j.profile.min_comm_ns = static_cast<int64_t>(mb * 1e6 / (0.9 * kTenGbit) * 1e9);
  j.profile.comm_ns = j.profile.min_comm_ns;
  j.profile.period_ns = j.profile.compute_ns + j.profile.comm_ns;
  return j;
}

TurnFigures Figures(const JobState& j) {
  const auto f = FiguresForTurns(j, kTenGbit, PlanningConfig{});
  EXPECT_TRUE(f.has_value());
  return f.value_or(TurnFigures{});
}

const TwoJobLinks::Capacities kNoCapacities;

// An index whose jobs' figures are read at 10 Gbit/s, as a service whose links all carry that.
TwoJobLinks Index(const TwoJobLinks::Capacities& capacity = kNoCapacities) {
  return TwoJobLinks(capacity, [](const JobState& j, std::span<const std::string>) {
    return FiguresForTurns(j, kTenGbit, PlanningConfig{});
  });
}

TEST(Turns, FiguresAreThePhaseOnTheWireAloneAndTheComputeWithoutTheMargins) {
  const JobState j = Measured(1, 1, {"up"}, 100, 200);
  const TurnFigures f = Figures(j);
  EXPECT_EQ(f.wire_ns, 80 * kMs);  // 100 MB of a 2-rank ring at 10 Gbit/s
  EXPECT_EQ(f.compute_ns, 200 * kMs);
  EXPECT_EQ(f.period_ns, 280 * kMs);
  JobState unmeasured = j;
  unmeasured.has_profile = false;
  EXPECT_FALSE(FiguresForTurns(unmeasured, kTenGbit, PlanningConfig{}).has_value());
}

TEST(Turns, TheTwoJobsOfALinkTakeTurnsAsTheyRank) {
  const JobState a = Measured(1, 1, {"up", "down"}, 100, 200);
  const JobState b = Measured(2, 1, {"up"}, 200, 100);
  const JobState low = Measured(3, 0, {"down"}, 50, 50);
  TwoJobLinks links = Index();
  for (const JobState* j : {&a, &b, &low}) links.Add(*j, j->links);

  // a and b are equals on "up"; low ranks below a on "down".
  const TurnSet sa = links.TurnsFor(a);
  ASSERT_EQ(sa.count, 1u);
  EXPECT_EQ(sa.wire_ns, 80 * kMs);
  EXPECT_EQ(sa.period_ns, 280 * kMs);
  EXPECT_EQ(sa.partners[0], (TurnPartner{2, false, 160 * kMs, 100 * kMs, 0, 0}));
  const TurnSet sb = links.TurnsFor(b);
  ASSERT_EQ(sb.count, 1u);
  EXPECT_EQ(sb.partners[0].job, 1u);
  const TurnSet sl = links.TurnsFor(low);
  ASSERT_EQ(sl.count, 1u);
  EXPECT_EQ(sl.partners[0], (TurnPartner{1, true, 80 * kMs, 200 * kMs, 0, 0}));
}

TEST(Turns, NoTurnsOnACrowdedLinkOrWithAJobNotMeasuredYet) {
  const JobState a = Measured(1, 1, {"up"}, 100, 200);
  const JobState b = Measured(2, 1, {"up", "side"}, 100, 200);
  const JobState c = Measured(3, 1, {"up"}, 100, 200);
  JobState unmeasured = Measured(4, 1, {"side"}, 100, 200);
  unmeasured.has_profile = false;
  TwoJobLinks links = Index();
  for (const JobState* j : {&a, &b, &c}) links.Add(*j, j->links);
  links.Add(unmeasured, unmeasured.links);
  EXPECT_EQ(links.TurnsFor(a).count, 0u);  // three jobs on "up"
  EXPECT_EQ(links.TurnsFor(b).count, 0u);  // "side": its partner has no figures
  EXPECT_EQ(links.TurnsFor(unmeasured).count, 0u);
}

TEST(Turns, APartnerOnTwoLinksIsOnePartner) {
  const JobState a = Measured(1, 1, {"up", "down"}, 100, 200);
  const JobState b = Measured(2, 3, {"up", "down"}, 100, 200);
  TwoJobLinks links = Index();
  for (const JobState* j : {&a, &b}) links.Add(*j, j->links);
  const TurnSet s = links.TurnsFor(a);
  ASSERT_EQ(s.count, 1u);
  EXPECT_TRUE(s.partners[0].higher);
  EXPECT_EQ(links.TurnsFor(b).count, 0u);  // nothing ranks at or above it
}

// Where the plan keeps two jobs apart they take no turns: a gated job ranked above is what the
// other yields to already, and two gated jobs are interleaved by their timetables. A gated job
// still takes turns with an ungated equal (the plan does not keep that one out of its way).
TEST(Turns, NoTurnsWhereThePlanKeepsThemApart) {
  const auto gated = [](JobState j) {
    j.planned = true;
    j.timetable = {1, 0, 500 * kMs, 0, 100 * kMs, 5 * kMs, 400 * kMs};
    return j;
  };
  const JobState high = gated(Measured(1, 3, {"up"}, 100, 200));
  const JobState low = Measured(2, 1, {"up"}, 100, 200);
  const JobState g1 = gated(Measured(3, 1, {"side"}, 100, 200));
  const JobState g2 = gated(Measured(4, 1, {"side"}, 100, 200));
  const JobState g3 = gated(Measured(5, 1, {"down"}, 100, 200));
  const JobState free = Measured(6, 1, {"down"}, 100, 200);
  TwoJobLinks links = Index();
  for (const JobState* j : {&high, &low, &g1, &g2, &g3, &free}) {
    links.Add(*j, j->links);
  }
  EXPECT_EQ(links.TurnsFor(low).count, 0u) << "it yields to the high job's window";
  EXPECT_EQ(links.TurnsFor(g1).count, 0u) << "their timetables interleave them";
  ASSERT_EQ(links.TurnsFor(g3).count, 1u);
  EXPECT_EQ(links.TurnsFor(g3).partners[0].job, 6u);
  ASSERT_EQ(links.TurnsFor(free).count, 1u);
  EXPECT_EQ(links.TurnsFor(free).partners[0].job, 5u);
}

TEST(Turns, AtMostKMaxTurnPartners) {
  std::vector<JobState> jobs;
  std::vector<std::string> own;
  for (uint64_t i = 0; i < kMaxTurnPartners + 2; ++i) {
    own.push_back("l" + std::to_string(i));
    jobs.push_back(Measured(10 + i, 1, {own.back()}, 100, 200));
  }
  jobs.push_back(Measured(1, 1, own, 100, 200));
  TwoJobLinks links = Index();
  for (const JobState& j : jobs) links.Add(j, j.links);
  const TurnSet s = links.TurnsFor(jobs.back());
  ASSERT_EQ(s.count, kMaxTurnPartners);
  for (uint32_t i = 0; i < s.count; ++i) EXPECT_EQ(s.partners[i].job, 10 + i);
}

// The index is rebuilt over every running job after each join or leave: figures are worked out
// only for the jobs on a link with exactly one other, once each.
TEST(Turns, FiguresAreAskedOnlyForTheJobsOfTwoJobLinksAndOnce) {
  const JobState a = Measured(1, 1, {"up", "down"}, 100, 200);
  const JobState b = Measured(2, 1, {"up", "down"}, 100, 200);
  const JobState c = Measured(3, 1, {"side"}, 100, 200);
  const JobState d = Measured(4, 1, {"crowd"}, 100, 200);
  const JobState e = Measured(5, 1, {"crowd"}, 100, 200);
  const JobState f = Measured(6, 1, {"crowd"}, 100, 200);
  std::map<uint64_t, int> asked;
  TwoJobLinks links(kNoCapacities, [&](const JobState& j, std::span<const std::string> on) {
    ++asked[j.id];
    EXPECT_EQ(on.size(), j.links.size());
    return FiguresForTurns(j, kTenGbit, PlanningConfig{});
  });
  for (const JobState* j : {&a, &b, &c, &d, &e, &f}) links.Add(*j, j->links);
  for (const JobState* j : {&a, &b, &c, &d, &e, &f}) (void)links.TurnsFor(*j);
  EXPECT_EQ(links.TurnsFor(a).count, 1u);
  EXPECT_EQ(asked, (std::map<uint64_t, int>{{1, 1}, {2, 1}}))
      << "c is alone on its link, d, e and f are three on theirs";
}

TEST(Turns, HeldToAWindowIsAPlannedGatedJobThatIsNotBestEffort) {
  JobState j = Measured(1, 1, {"up"}, 100, 200);
  EXPECT_FALSE(HeldToAWindow(j)) << "not planned";
  j.planned = true;
  j.timetable = {1, 0, 500 * kMs, 0, 500 * kMs, 0, 0};
  EXPECT_FALSE(HeldToAWindow(j)) << "always open";
  j.timetable.window_ns = 100 * kMs;
  EXPECT_TRUE(HeldToAWindow(j));
  j.best_effort = true;
  EXPECT_FALSE(HeldToAWindow(j));
}

TEST(Turns, SetsAreRefreshedAtOnceForJobsAndAtMostOnceASecondForProfiles) {
  TurnsRefresh r;
  EXPECT_FALSE(r.Due(0));
  r.ProfilesMoved();
  EXPECT_TRUE(r.Due(TurnsRefresh::kProfilesEveryNs)) << "a second after the last refresh (0)";
  r.Refreshed(5'000 * kMs);
  r.ProfilesMoved();
  EXPECT_FALSE(r.Due(5'000 * kMs + 999 * kMs));
  EXPECT_TRUE(r.Due(6'000 * kMs));
  r.JobsChanged();
  EXPECT_TRUE(r.Due(5'000 * kMs + 1)) << "a job came, left, or its hold moved: at once";
  r.Refreshed(5'000 * kMs + 1);
  EXPECT_FALSE(r.Due(7'000 * kMs)) << "nothing moved since";
  // The clock steps back by a minute: profiles that move are refreshed at once, not a minute on.
  r.Refreshed(70'000 * kMs);
  r.ProfilesMoved();
  EXPECT_TRUE(r.Due(10'000 * kMs));
}

TEST(Turns, OnlyWhereBothJobsAloneFillTheLink) {
  // Both saturate a 10 Gbit/s link (their β is its capacity). On a 10 Gbit/s "up" they fill it
  // and take turns; on a 40 Gbit/s "wide" each uses a quarter and sharing costs them nothing.
  const JobState a = Measured(1, 1, {"up", "wide"}, 100, 200);
  const JobState b = Measured(2, 1, {"up"}, 100, 200);
  const JobState c = Measured(3, 1, {"wide"}, 100, 200);
  const std::unordered_map<std::string, double> capacity = {{"up", kTenGbit},
                                                            {"wide", 4 * kTenGbit}};
  TwoJobLinks links = Index(capacity);
  for (const JobState* j : {&a, &b, &c}) links.Add(*j, j->links);
  EXPECT_DOUBLE_EQ(Figures(a).beta_bps, kTenGbit);
  const TurnSet s = links.TurnsFor(a);
  ASSERT_EQ(s.count, 1u);
  EXPECT_EQ(s.partners[0].job, 2u);
  EXPECT_EQ(links.TurnsFor(c).count, 0u) << "a quarter of the link each: no turns";
  // Just above and just below kTurnsLinkShare of the link.
  const std::vector<std::string> wide = {"wide"};
  for (const double share : {kTurnsLinkShare * 0.99, kTurnsLinkShare * 1.01}) {
    const TwoJobLinks::Capacities narrower = {{"wide", kTenGbit / share}};
    TwoJobLinks at = Index(narrower);
    at.Add(a, wide);
    at.Add(c, wide);
    EXPECT_EQ(at.TurnsFor(c).count, share >= kTurnsLinkShare ? 1u : 0u) << share;
  }
}

}  // namespace
}  // namespace metronome::controller
