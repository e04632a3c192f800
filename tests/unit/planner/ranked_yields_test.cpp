// RankedYields on hand-built plans: who yields to whom.
#include "metronome/planner/ranked_yields.hpp"

#include <gtest/gtest.h>

#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::kMs;
using testing::MakeJob;

// A high-priority job gated in an 80 ms window every 280 ms and a low-priority one drifting
// (best-effort, ungated), both on one link of `capacity` bytes per second.
struct Pair {
  explicit Pair(double capacity, int low_priority = 0) : topology(testing::Links(1, capacity)) {
    jobs = {MakeJob(1, 3, 280, 80, {0}), MakeJob(2, low_priority, 300, 100, {0})};
    for (Job& j : jobs) j.profile.beta_bps = capacity;
    JobPlan high;
    high.id = 1;
    high.timetable = MakeTimetable(280 * kMs, 0, 80 * kMs, 10 * kMs);
    JobPlan low;
    low.id = 2;
    low.best_effort = true;
    low.timetable = MakeTimetable(300 * kMs, 0, 300 * kMs, 0);
    plan.jobs = {high, low};
  }
  Topology topology;
  std::vector<Job> jobs;
  Plan plan;
};

TEST(RankedYields, ALowerJobYieldsToTheHigherWindow) {
  const Pair slow(1.25e9);  // 10 Gbit/s
  const auto y = RankedYields(slow.topology, slow.jobs, slow.plan, PlannerOptions{});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0].yields, nullptr) << "the high job yields to nothing";
  ASSERT_NE(y[1].yields, nullptr);
  ASSERT_EQ(y[1].yields->count, 1u);
  const YieldWindow& w = y[1].yields->windows[0];
  EXPECT_EQ(w.period_ns, 280 * kMs);
  EXPECT_GE(w.window_ns, 80 * kMs);  // the window and the part of its cushion jitter may take
}

// A phase may end a fifth of the window past its opening (PlannerOptions::yield_allowance),
// shared among the jobs ranked below it on the link.
TEST(RankedYields, TheJobsBelowAWindowShareItsAllowance) {
  Pair one(1.25e9);
  auto y = RankedYields(one.topology, one.jobs, one.plan, PlannerOptions{});
  ASSERT_NE(y[1].yields, nullptr);
  EXPECT_EQ(y[1].yields->allowance_ns, 16 * kMs);  // 80 ms / 5
  // Three more below it, of two priorities: four share the window.
  for (const JobId id : {3u, 4u, 5u}) {
    one.jobs.push_back(MakeJob(id, id == 3 ? 0 : 1, 300, 100, {0}));
    one.jobs.back().profile.beta_bps = 1.25e9;
    JobPlan p = one.plan.jobs[1];
    p.id = id;
    one.plan.jobs.push_back(p);
  }
  y = RankedYields(one.topology, one.jobs, one.plan, PlannerOptions{});
  for (std::size_t i = 1; i < y.size(); ++i) {
    ASSERT_NE(y[i].yields, nullptr) << i;
    EXPECT_EQ(y[i].yields->allowance_ns, 4 * kMs) << i;
  }
  PlannerOptions none;
  none.yield_allowance = 0.0;
  EXPECT_EQ(RankedYields(one.topology, one.jobs, one.plan, none)[1].yields->allowance_ns, 0);
}

TEST(RankedYields, JobsOfOnePriorityDoNotYieldToEachOther) {
  const Pair peers(1.25e9, 3);
  const auto y = RankedYields(peers.topology, peers.jobs, peers.plan, PlannerOptions{});
  EXPECT_EQ(y[1].yields, nullptr);
}

}  // namespace
}  // namespace metronome::planner
