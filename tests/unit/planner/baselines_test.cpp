// The baselines: no time scheduling, and the CASSINI-style policy.
#include <gtest/gtest.h>

#include "metronome/planner/baselines.hpp"
#include "metronome/planner/checker.hpp"
#include "metronome/planner/planner.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::Entry;
using testing::kMs;
using testing::MakeJob;

TEST(NoTimeScheduling, EveryJobUngatedAtItsNaturalPeriodAndContentionReported) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 50, {0})}};
  const Plan plan = PlanWithoutTimeScheduling(p);
  EXPECT_FEASIBLE(p, plan);  // nothing is gated, so nothing can collide in the timetable
  for (const JobPlan& e : plan.jobs) {
    EXPECT_TRUE(e.best_effort);
    EXPECT_TRUE(metronome::AlwaysOpen(e.timetable));
    EXPECT_GT(e.predicted_slowdown, 0.0);
  }
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, 100 * kMs);
  // Independent phases: both on the wire 0.4·0.5 = 20 % of the time, one capacity too many.
  EXPECT_NEAR(plan.links[0].contention, 0.2, 0.02);
}

TEST(NoTimeScheduling, AJobAloneSeesNoContention) {
  const Problem p{testing::Links(2), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 50, {1})}};
  const Plan plan = PlanWithoutTimeScheduling(p);
  EXPECT_EQ(plan.links[0].contention, 0.0);
  EXPECT_EQ(Entry(plan, 1).predicted_slowdown, 0.0);
}

TEST(Cassini, RotatesCompatibleJobsApart) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 50, {0})}};
  const Plan plan = PlanCassini(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(plan.links[0].contention, 0.0);
}

TEST(Cassini, HasNoPrioritiesAndNoStretching) {
  Problem p{testing::Links(1), {MakeJob(1, 1, 100, 30, {0}), MakeJob(2, 0, 190, 50, {0})}};
  const Plan a = PlanCassini(p);
  p.jobs[0].priority = 0;
  p.jobs[1].priority = 7;
  const Plan b = PlanCassini(p);
  for (const JobPlan& e : a.jobs) {
    EXPECT_EQ(Entry(b, e.id).timetable.offset_ns, e.timetable.offset_ns);
    EXPECT_EQ(e.timetable.period_ns, p.jobs[e.id - 1].profile.period_ns);  // T = P
  }
  // Periods 100 and 190 drift against each other: CASSINI leaves contention; the reported
  // figure agrees with the checker's sweep of the same windows.
  const CheckReport r = CheckPlan(p, a);
  EXPECT_FALSE(r.ok);
  EXPECT_NEAR(a.links[0].contention, r.overload[0], 1e-6);
}

TEST(Cassini, AffinityTraversalMakesShiftsConsistentAlongAChain) {
  // Job 2 spans both links: its shift is fixed once and both links' rotations hold.
  const Problem p{
      testing::Links(2),
      {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 40, {0, 1}), MakeJob(3, 0, 100, 40, {1})}};
  const Plan plan = PlanCassini(p);
  EXPECT_FEASIBLE(p, plan);
}

TEST(Cassini, MetronomeKeepsTheHighPriorityJobWholeAndIsNoWorseWeighted) {
  const Problem p{
      testing::Links(1),
      {MakeJob(1, 2, 100, 40, {0}), MakeJob(2, 1, 100, 30, {0}), MakeJob(3, 0, 100, 40, {0})}};
  const Plan cassini = PlanCassini(p);
  const Plan metronome = MakePlan(p);
  EXPECT_FEASIBLE(p, metronome);
  auto weighted = [&](const Plan& plan) {
    double sum = 0.0;
    for (const Job& j : p.jobs) {
      sum += PriorityWeight(j.priority) * Entry(plan, j.id).predicted_slowdown;
    }
    return sum;
  };
  EXPECT_EQ(Entry(metronome, 1).predicted_slowdown, 0.0);  // priorities honoured
  EXPECT_LE(weighted(metronome), weighted(cassini) + 1e-9);
}

}  // namespace
}  // namespace metronome::planner
