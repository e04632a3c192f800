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

TEST(RankedYields, JobsOfOnePriorityDoNotYieldToEachOther) {
  const Pair peers(1.25e9, 3);
  const auto y = RankedYields(peers.topology, peers.jobs, peers.plan, PlannerOptions{});
  EXPECT_EQ(y[1].yields, nullptr);
}

}  // namespace
}  // namespace metronome::planner
