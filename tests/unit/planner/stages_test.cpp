// The three stages on the small instances the issue names. Every plan goes through the
// independent checker (EXPECT_FEASIBLE).
#include <gtest/gtest.h>

#include "metronome/planner/planner.hpp"
#include "metronome/planner/ranked_yields.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::Entry;
using testing::kMs;
using testing::MakeJob;

// True when the windows of a and b overlap somewhere in time (same period assumed).
bool WindowsOverlap(const JobPlan& a, const JobPlan& b) {
  const Nanos t = a.timetable.period_ns;
  const Nanos d = ((b.timetable.offset_ns - a.timetable.offset_ns) % t + t) % t;
  return d < a.timetable.window_ns || t - d < b.timetable.window_ns;
}

TEST(Stages, TwoEqualPriorityJobsDutyPoint4AndPoint5DoNotOverlapAndGetEqualCushions) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 50, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& a = Entry(plan, 1);
  const JobPlan& b = Entry(plan, 2);
  EXPECT_FALSE(a.best_effort);
  EXPECT_FALSE(b.best_effort);
  EXPECT_FALSE(WindowsOverlap(a, b));
  EXPECT_EQ(a.timetable.period_ns, 100 * kMs);
  EXPECT_EQ(b.timetable.period_ns, 100 * kMs);
  EXPECT_EQ(a.timetable.late_slack_ns, b.timetable.late_slack_ns);
  EXPECT_EQ(a.timetable.late_slack_ns, 5 * kMs);  // the 10 ms left, split evenly
  EXPECT_EQ(plan.links[0].min_cushion_ns, 5 * kMs);
}

TEST(Stages, HigherPriorityGetsTheLargerCushion) {
  // π = 4 against π = 1: the 10 ms of slack split 8 : 2.
  const Problem p{testing::Links(1), {MakeJob(1, 3, 100, 40, {0}), MakeJob(2, 0, 100, 50, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(Entry(plan, 1).timetable.late_slack_ns, 8 * kMs);
  EXPECT_EQ(Entry(plan, 2).timetable.late_slack_ns, 2 * kMs);
}

TEST(Stages, ADriftingBestEffortJobDoesNotKeepTheSlackInOnePiece) {
  // Jobs 1 (π = 3) and 2 (π = 2) take 2 × 170 ms of 485 ms; job 3 (230 ms, 100 ms on the wire)
  // fits at no period and its 230 ms has 97 positions on the 485 ms circle: it drifts
  // ungated, and one piece of slack would serve nobody. The 145 ms left are
  // spread 3 : 2 as on a link without best-effort traffic (stage 3 once skipped every link
  // that carried any best-effort job, leaving the high-priority job no cushion at all).
  const Problem p{
      testing::Links(1),
      {MakeJob(1, 2, 485, 170, {0}), MakeJob(2, 1, 485, 170, {0}), MakeJob(3, 0, 230, 100, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& drifting = Entry(plan, 3);
  ASSERT_TRUE(drifting.best_effort);
  ASSERT_EQ(drifting.timetable.window_ns, drifting.timetable.period_ns);
  EXPECT_EQ(Entry(plan, 1).timetable.late_slack_ns, 87 * kMs);
  EXPECT_EQ(Entry(plan, 2).timetable.late_slack_ns, 58 * kMs);
}

TEST(Stages, OverloadedLinkLowestPriorityIsStretchedToAHarmonicPeriodThatFits) {
  // Duty cycles 0.4 + 0.4 + 0.3 = 1.1 on one link.
  const Problem p{
      testing::Links(1),
      {MakeJob(1, 2, 200, 80, {0}), MakeJob(2, 1, 200, 80, {0}), MakeJob(3, 0, 100, 30, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& high = Entry(plan, 1);
  EXPECT_FALSE(high.best_effort);                  // uncontended: gated, checked by the checker
  EXPECT_EQ(high.timetable.period_ns, 200 * kMs);  // unstretched
  EXPECT_EQ(Entry(plan, 2).timetable.period_ns, 200 * kMs);
  const JobPlan& low = Entry(plan, 3);
  EXPECT_FALSE(low.best_effort);
  EXPECT_EQ(low.timetable.period_ns, 200 * kMs);  // 100 ms stretched to the harmonic 200 ms
  EXPECT_DOUBLE_EQ(high.predicted_slowdown, 0.0);
  EXPECT_DOUBLE_EQ(low.predicted_slowdown, 1.0);
}

TEST(Stages, OverloadedLinkLowestPriorityIsBestEffortWhenNoPeriodFits) {
  // 0.4 + 0.3 + 0.4: stretching the last cannot shrink its 40 ms window into a 30 ms gap.
  const Problem p{
      testing::Links(1),
      {MakeJob(1, 2, 100, 40, {0}), MakeJob(2, 1, 100, 30, {0}), MakeJob(3, 0, 100, 40, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& high = Entry(plan, 1);
  EXPECT_FALSE(high.best_effort);
  EXPECT_EQ(high.timetable.period_ns, 100 * kMs);
  EXPECT_FALSE(Entry(plan, 2).best_effort);
  const JobPlan& low = Entry(plan, 3);
  EXPECT_TRUE(low.best_effort);
  // Not starved: ungated at its natural period, its phases drifting.
  EXPECT_EQ(low.timetable.period_ns, 100 * kMs);
  EXPECT_EQ(low.timetable.window_ns, low.timetable.period_ns);
  // It yields to both windows ranked above it (ranked_yields.hpp), the high-priority one
  // first, and pays for the contention itself: the gated jobs are predicted at full speed.
  const auto yields = RankedYields(p.topology, p.jobs, plan, PlannerOptions{});
  ASSERT_NE(yields[2].yields, nullptr);
  ASSERT_EQ(yields[2].yields->count, 2u);
  EXPECT_EQ(yields[2].yields->windows[0].offset_ns, high.timetable.offset_ns);
  EXPECT_DOUBLE_EQ(high.predicted_slowdown, 0.0);
  EXPECT_DOUBLE_EQ(Entry(plan, 2).predicted_slowdown, 0.0);
  EXPECT_GT(low.predicted_slowdown, 0.0);
  EXPECT_GT(plan.links[0].contention, 0.0);
}

TEST(Stages, Periods100And190TheSecondBecomes200) {
  const Problem p{testing::Links(1), {MakeJob(1, 1, 100, 30, {0}), MakeJob(2, 0, 190, 50, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, 100 * kMs);
  EXPECT_EQ(Entry(plan, 2).timetable.period_ns, 200 * kMs);
  EXPECT_FALSE(Entry(plan, 2).best_effort);
  EXPECT_EQ(plan.links[0].hyperperiod_ns, 200 * kMs);
}

TEST(Stages, UnrelatedPeriodsInterleaveUnstretchedWhenTheirGcdLeavesRoom) {
  // 100 ms and 120 ms: windows meet modulo gcd = 20 ms; 8 + 8 ms fit in it.
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 8, {0}), MakeJob(2, 0, 120, 8, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, 100 * kMs);
  EXPECT_EQ(Entry(plan, 2).timetable.period_ns, 120 * kMs);
  EXPECT_FALSE(Entry(plan, 2).best_effort);
  EXPECT_EQ(plan.links[0].hyperperiod_ns, 600 * kMs);
}

TEST(Stages, AStretchThatCostsMoreThanTheContentionItAvoidsIsNotTaken) {
  // 30 + 20 ms do not fit in gcd(100, 120) = 20 ms; 120 → 200 ms would cost the second job
  // 2/3 of its speed to avoid sharing the link a few percent of the time: it runs best-effort
  // at its natural period instead, unstretched.
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 30, {0}), MakeJob(2, 0, 120, 20, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, 100 * kMs);
  EXPECT_TRUE(Entry(plan, 2).best_effort);
  EXPECT_EQ(Entry(plan, 2).timetable.period_ns, 120 * kMs);
  EXPECT_LT(Entry(plan, 2).predicted_slowdown, 2.0 / 3.0);
}

TEST(Stages, ChainOfLinksGetsOneConsistentOffsetPerJob) {
  // L0 - L1 - L2 - L3: jobs on neighbouring pairs plus one on each link, every link ≥ 0.8 full.
  const Problem p{
      testing::Links(4),
      {MakeJob(1, 0, 100, 30, {0, 1}), MakeJob(2, 0, 100, 30, {1, 2}),
       MakeJob(3, 0, 100, 30, {2, 3}), MakeJob(4, 0, 100, 50, {0}), MakeJob(5, 0, 100, 30, {1}),
       MakeJob(6, 0, 100, 50, {3}), MakeJob(7, 0, 100, 40, {2})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  for (const JobPlan& e : plan.jobs) {
    EXPECT_FALSE(e.best_effort) << "job " << e.id;
    EXPECT_EQ(e.timetable.period_ns, 100 * kMs) << "job " << e.id;
  }
  EXPECT_EQ(plan.jobs.size(), 7u);  // one entry, hence one offset, per job
}

TEST(Stages, CycleOfLinksGetsOneConsistentOffsetPerJob) {
  // A on L0-L1, B on L1-L2, C on L2-L0 meet pairwise; one more job on each link: 90 % each.
  const Problem p{testing::Links(3),
                  {MakeJob(1, 0, 100, 30, {0, 1}), MakeJob(2, 0, 100, 30, {1, 2}),
                   MakeJob(3, 0, 100, 30, {2, 0}), MakeJob(4, 0, 100, 30, {0}),
                   MakeJob(5, 0, 100, 30, {1}), MakeJob(6, 0, 100, 30, {2})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  for (const JobPlan& e : plan.jobs) {
    EXPECT_FALSE(e.best_effort) << "job " << e.id;
    EXPECT_EQ(e.timetable.period_ns, 100 * kMs) << "job " << e.id;
  }
  for (const LinkPlan& l : plan.links) EXPECT_NEAR(l.served_load, 0.9, 1e-9);
}

TEST(Stages, JobsWithLowBetaStack) {
  // Two jobs at 40 % of the capacity with duty cycles 0.6: they must overlap, and may.
  const Problem p{testing::Links(1),
                  {MakeJob(1, 0, 100, 60, {0}, 0.4), MakeJob(2, 0, 100, 60, {0}, 0.4)}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& a = Entry(plan, 1);
  const JobPlan& b = Entry(plan, 2);
  EXPECT_FALSE(a.best_effort);
  EXPECT_FALSE(b.best_effort);
  EXPECT_EQ(a.timetable.period_ns, 100 * kMs);
  EXPECT_EQ(b.timetable.period_ns, 100 * kMs);
  EXPECT_TRUE(WindowsOverlap(a, b));
}

TEST(Stages, FullBetaJobDoesNotStackOnLowBetaJobs) {
  const Problem p{testing::Links(1),
                  {MakeJob(1, 1, 100, 60, {0}, 0.4), MakeJob(2, 1, 100, 60, {0}, 0.4),
                   MakeJob(3, 0, 100, 30, {0}, 1.0)}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& big = Entry(plan, 3);
  EXPECT_FALSE(big.best_effort);
  EXPECT_FALSE(WindowsOverlap(Entry(plan, 1), big));
  EXPECT_FALSE(WindowsOverlap(Entry(plan, 2), big));
}

TEST(Stages, JobOnOneNodeNeedsNoWindow) {
  Problem p{Topology::TwoTier({1, 2, 1e9, 1e9}), {}};
  Job j = MakeJob(1, 0, 100, 40, {});
  j.nodes = {0, 0};
  p.jobs.push_back(j);
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(Entry(plan, 1).timetable.window_ns, Entry(plan, 1).timetable.period_ns);
  EXPECT_FALSE(Entry(plan, 1).best_effort);
}

}  // namespace
}  // namespace metronome::planner
