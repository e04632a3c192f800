// What-if scoring of candidate placements.
#include <gtest/gtest.h>

#include "metronome/planner/what_if.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::kMs;

Job PodJob(JobId id, int priority, Nanos period_ms, Nanos comm_ms) {
  Job j;
  j.id = id;
  j.priority = priority;
  j.profile = {period_ms * kMs, comm_ms * kMs, 1e9};
  return j;
}

// One rack of four nodes; job 1 (high priority) between nodes 0 and 1.
OnlinePlanner BusyRack() {
  OnlinePlanner planner(Topology::TwoTier({1, 4, 1e9, 4e9}));
  Job a = PodJob(1, 2, 100, 70);
  a.nodes = {0, 1};
  planner.AddJob(a);
  return planner;
}

TEST(WhatIf, FreeNodesCostNothingBusyNodesCostSlowdown) {
  const OnlinePlanner planner = BusyRack();
  const std::vector<std::vector<NodeId>> candidates{{2, 3}, {0, 2}};
  const auto r = WhatIf(planner, PodJob(9, 0, 100, 40), candidates, {true});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].gated);
  EXPECT_EQ(r[0].job_slowdown, 0.0);
  EXPECT_EQ(r[0].neighbour_slowdown, 0.0);
  EXPECT_TRUE(r[0].affected.empty());
  // Node 0's uplink has 30 ms free per 100 ms: 40 ms does not fit at any harmonic period.
  EXPECT_FALSE(r[1].gated);
  EXPECT_GT(r[1].job_slowdown, 0.0);
  EXPECT_GT(r[1].neighbour_slowdown, 0.0);
  EXPECT_TRUE(r[1].hurts_higher_priority);
  ASSERT_EQ(r[1].affected.size(), 1u);
  EXPECT_EQ(r[1].affected[0].id, 1u);
  EXPECT_GT(r[1].affected[0].slowdown_after, r[1].affected[0].slowdown_before);
}

TEST(WhatIf, AgreesWithAddingTheJob) {
  const OnlinePlanner planner = BusyRack();
  const std::vector<std::vector<NodeId>> candidates{{2, 3}, {0, 2}, {1, 3}, {0, 0}};
  Job probe = PodJob(9, 0, 100, 20);
  const auto r = WhatIf(planner, probe, candidates);
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    OnlinePlanner copy(planner.GetTopology());
    copy.Adopt(planner.Jobs(), planner.Snapshot());
    probe.nodes = candidates[c];
    const AddResult added = copy.AddJob(probe);
    EXPECT_EQ(r[c].gated, !added.job.best_effort) << "candidate " << c;
    if (r[c].gated) {
      EXPECT_EQ(r[c].period_ns, added.job.timetable.period_ns) << "candidate " << c;
    }
    const Problem p{copy.GetTopology(), copy.Jobs()};
    EXPECT_FEASIBLE(p, copy.Snapshot());
  }
}

// Its phases (30 ms of every 100) leave no time to spare between the higher windows (140 ms of
// every 200): it could not wait for them, and is stretched to the harmonic period that fits.
TEST(WhatIf, PredictsStretchWhenOnlyALongerPeriodFits) {
  OnlinePlanner planner(Topology::TwoTier({1, 4, 1e9, 4e9}));
  Job a = PodJob(1, 2, 200, 80);
  a.nodes = {0, 1};
  planner.AddJob(a);
  Job b = PodJob(2, 1, 200, 60);
  b.nodes = {0, 1};
  planner.AddJob(b);
  const std::vector<std::vector<NodeId>> candidates{{0, 2}};
  const auto r = WhatIf(planner, PodJob(3, 0, 100, 30), candidates);
  ASSERT_TRUE(r[0].gated);
  EXPECT_EQ(r[0].period_ns, 200 * kMs);
  EXPECT_DOUBLE_EQ(r[0].job_slowdown, 1.0);
}

// A window of an unrelated period sweeps across the candidate's: no offset avoids it, and the
// candidate meets it in proportion to both duty cycles. It is neither harmless nor ignored.
TEST(WhatIf, WindowsOfAnUnrelatedPeriodAreMetInProportionToBothDutyCycles) {
  const OnlinePlanner planner = BusyRack();  // job 1: 70 ms of every 100 ms, high priority
  const std::vector<std::vector<NodeId>> candidates{{0, 2}};
  const auto r = WhatIf(planner, PodJob(9, 0, 137, 60), candidates, {true});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].gated);
  EXPECT_TRUE(r[0].hurts_higher_priority);
  // Job 1 overlaps the candidate 60/137 of the time its own 70 ms window is open, at an excess
  // of the whole link: its phases slow by about 60/137 · 0.7 of its period.
  const double added = 60.0 / 137.0 * 0.7;
  EXPECT_NEAR(r[0].neighbour_slowdown, PriorityWeight(2) * added, 0.02 * PriorityWeight(2));
  ASSERT_EQ(r[0].affected.size(), 1u);
  EXPECT_NEAR(r[0].affected[0].slowdown_after - r[0].affected[0].slowdown_before, added, 0.02);
  EXPECT_GT(r[0].job_slowdown, 0.0);
}

}  // namespace
}  // namespace metronome::planner
