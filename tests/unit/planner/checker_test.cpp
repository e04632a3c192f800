// The checker itself must catch what it is there to catch.
#include <gtest/gtest.h>

#include "metronome/planner/checker.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::kMs;
using testing::MakeJob;

struct Entry {
  JobId id;
  Nanos period, offset, window, slack;
  bool best_effort;
};

Plan Gated(const std::vector<Entry>& entries) {
  Plan p;
  for (const Entry& e : entries) {
    JobPlan j;
    j.id = e.id;
    j.best_effort = e.best_effort;
    j.timetable = MakeTimetable(e.period, e.offset, e.window, e.slack);
    p.jobs.push_back(j);
  }
  return p;
}

TEST(Checker, AcceptsDisjointWindows) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 50, {0})}};
  const Plan plan = Gated({{1, 100 * kMs, 0, 40 * kMs, 5 * kMs, false},
                           {2, 100 * kMs, 45 * kMs, 50 * kMs, 5 * kMs, false}});
  EXPECT_TRUE(CheckPlan(p, plan).ok);
}

TEST(Checker, RejectsOverlapAcrossDifferentPeriods) {
  // Job 2's second window (period 50) meets job 1's window at 60..80.
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 20, {0}), MakeJob(2, 0, 50, 10, {0})}};
  const Plan plan = Gated(
      {{1, 100 * kMs, 60 * kMs, 20 * kMs, 0, false}, {2, 50 * kMs, 20 * kMs, 10 * kMs, 0, false}});
  const CheckReport r = CheckPlan(p, plan);
  EXPECT_FALSE(r.ok);
  EXPECT_GT(r.overload[0], 0.0);
}

TEST(Checker, RejectsALateSlackThatIsNotFree) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 50, {0})}};
  const Plan plan = Gated({{1, 100 * kMs, 0, 40 * kMs, 8 * kMs, false},
                           {2, 100 * kMs, 45 * kMs, 50 * kMs, 5 * kMs, false}});
  EXPECT_FALSE(CheckPlan(p, plan).ok);
}

TEST(Checker, StackingWithinCapacityIsFineAboveIsNot) {
  const Problem p{testing::Links(1),
                  {MakeJob(1, 0, 100, 60, {0}, 0.5), MakeJob(2, 0, 100, 60, {0}, 0.5),
                   MakeJob(3, 0, 100, 60, {0}, 0.5)}};
  const Plan two = Gated({{1, 100 * kMs, 0, 60 * kMs, 0, false},
                          {2, 100 * kMs, 0, 60 * kMs, 0, false},
                          {3, 100 * kMs, 0, 100 * kMs, 0, true}});
  EXPECT_TRUE(CheckPlan(p, two).ok);
  const Plan three = Gated({{1, 100 * kMs, 0, 60 * kMs, 0, false},
                            {2, 100 * kMs, 0, 60 * kMs, 0, false},
                            {3, 100 * kMs, 50 * kMs, 60 * kMs, 0, false}});
  EXPECT_FALSE(CheckPlan(p, three).ok);
}

TEST(Checker, RejectsPeriodBelowNaturalAndMissingJobs) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 40, {0}), MakeJob(2, 0, 100, 40, {0})}};
  const Plan plan = Gated({{1, 90 * kMs, 0, 40 * kMs, 0, false}});
  const CheckReport r = CheckPlan(p, plan);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.errors.size(), 2u);
}

}  // namespace
}  // namespace metronome::planner
