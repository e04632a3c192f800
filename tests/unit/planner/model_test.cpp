// The model: which links a job crosses, profiles, validation, timetable values.
#include <gtest/gtest.h>

#include "metronome/planner/plan.hpp"
#include "metronome/planner/topology.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::kMs;

TEST(Topology, RanksOnOneNodeCrossNoLink) {
  const Topology t = Topology::TwoTier({2, 4, 1e9, 4e9});
  const std::vector<NodeId> nodes{1, 1, 1};
  EXPECT_TRUE(t.LinksCrossed(nodes).empty());
}

TEST(Topology, JobWithinOneRackCrossesItsNodesUplinksOnly) {
  const Topology t = Topology::TwoTier({2, 4, 1e9, 4e9});
  const std::vector<NodeId> nodes{0, 2};
  const auto links = t.LinksCrossed(nodes);
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(t.GetLink(links[0]).name, "r0n0/up");
  EXPECT_EQ(t.GetLink(links[1]).name, "r0n2/up");
}

TEST(Topology, JobAcrossRacksAlsoCrossesTheRackUplinks) {
  const Topology t = Topology::TwoTier({2, 4, 1e9, 4e9});
  const std::vector<NodeId> nodes{0, 5};
  std::vector<std::string> names;
  for (const LinkId l : t.LinksCrossed(nodes)) names.push_back(t.GetLink(l).name);
  EXPECT_EQ(names, (std::vector<std::string>{"r0/up", "r0n0/up", "r1/up", "r1n1/up"}));
  EXPECT_EQ(t.GetLink(t.LinksCrossed(nodes)[0]).capacity_bps, 4e9);
}

TEST(Model, ExplicitLinksJoinTheImpliedOnes) {
  Problem p{Topology::TwoTier({1, 2, 1e9, 1e9}), {}};
  const LinkId spine = p.topology.AddLink("spine", 1e9);
  Job j;
  j.nodes = {0, 1};
  j.extra_links = {spine, spine};
  EXPECT_EQ(JobLinks(p.topology, j).size(), 3u);
}

// Jobs are grouped through the links they share, transitively; a job on no link is alone.
TEST(Model, LinkGroupsJoinJobsThroughSharedLinks) {
  const std::vector<std::vector<LinkId>> links{{1, 2}, {5}, {2, 3}, {}, {3, 9}, {5, 6}, {7}};
  EXPECT_EQ(LinkGroups(links), (std::vector<std::size_t>{0, 1, 0, 2, 0, 1, 3}));
  EXPECT_TRUE(LinkGroups({}).empty());
}

TEST(Model, ProfileFromVolume) {
  const JobProfile p = JobProfile::FromVolume(60 * kMs, 4e7, 1e9);  // 40 MB at 1 GB/s
  EXPECT_EQ(p.comm_ns, 40 * kMs);
  EXPECT_EQ(p.period_ns, 100 * kMs);
  EXPECT_DOUBLE_EQ(p.DutyCycle(), 0.4);
}

TEST(Model, ValidateRejectsUnusableInput) {
  Problem p{testing::Links(1), {}};
  p.jobs.push_back(testing::MakeJob(1, 0, 100, 40, {0}));
  EXPECT_TRUE(Validate(p).empty());
  p.jobs.push_back(testing::MakeJob(1, 0, 100, 140, {7}));  // duplicate, c > P, unknown link
  const auto errors = Validate(p);
  EXPECT_EQ(errors.size(), 3u);
}

TEST(Model, HigherPriorityWeighsMore) {
  EXPECT_LT(PriorityWeight(0), PriorityWeight(1));
  EXPECT_EQ(PriorityWeight(-3), PriorityWeight(0));
}

TEST(Timetable, GatedJobCarriesItsWindowAndSlack) {
  const metronome::Timetable t = MakeTimetable(200 * kMs, 30 * kMs, 50 * kMs, 5 * kMs);
  EXPECT_EQ(t.period_ns, 200 * kMs);
  EXPECT_EQ(t.offset_ns, 30 * kMs);
  EXPECT_EQ(t.window_ns, 50 * kMs);
  EXPECT_EQ(t.late_slack_ns, 5 * kMs);
  EXPECT_EQ(t.max_wait_ns, 150 * kMs);  // period − window: never nearly a whole period
  EXPECT_EQ(t.epoch_ns, 0);             // the plan's epoch: whoever pushes it sets it
  EXPECT_EQ(t.version, 0u);
}

TEST(Timetable, UngatedJobNeverWaits) {
  const metronome::Timetable t = MakeTimetable(100 * kMs, 0, 100 * kMs, 0);
  EXPECT_TRUE(metronome::AlwaysOpen(t));
  EXPECT_EQ(t.max_wait_ns, 0);
}

// A window widened by 30 ms (the overrun rule) may lengthen the period by as much, up to twice
// that; a jump to the next harmonic is a stretch not worth taking. Best-effort on either side:
// nothing to protect, the widening is taken.
TEST(Widening, StretchesOnlyWhenAGatedJobsPeriodGrowsByMoreThanTwiceTheWidening) {
  JobPlan was;
  was.id = 7;
  was.timetable = MakeTimetable(505 * kMs, 0, 200 * kMs, 10 * kMs);
  JobPlan now = was;
  now.timetable = MakeTimetable(535 * kMs, 0, 230 * kMs, 10 * kMs);
  EXPECT_FALSE(WideningStretches(was, now));
  now.timetable.period_ns = 565 * kMs;
  EXPECT_FALSE(WideningStretches(was, now));
  now.timetable.period_ns = 566 * kMs;
  EXPECT_TRUE(WideningStretches(was, now));
  now.timetable.period_ns = 1010 * kMs;
  EXPECT_TRUE(WideningStretches(was, now));
  now.best_effort = true;
  EXPECT_FALSE(WideningStretches(was, now));
  JobPlan ungated = was;
  ungated.best_effort = true;
  now.best_effort = false;
  EXPECT_FALSE(WideningStretches(ungated, now));
}

Score MakeScore(double high, double low, double latency, double cushion) {
  Score s;
  s.served_by_priority = {{1, high}, {0, low}};
  s.utilization = high + low;
  s.latency = latency;
  s.cushion_ns = cushion;
  return s;
}

TEST(Score, LexicographicWithTolerance) {
  const PlannerOptions o;
  EXPECT_TRUE(
      Better(MakeScore(1.0, 0.0, 5.0, 0.0), MakeScore(0.9, 0.0, 0.0, 100.0), o));  // stage 1
  EXPECT_TRUE(
      Better(MakeScore(1.0, 0.0, 1.0, 0.0), MakeScore(1.0, 0.0, 2.0, 100.0), o));         // stage 2
  EXPECT_TRUE(Better(MakeScore(1.0, 0.0, 1.0, 10.0), MakeScore(1.0, 0.0, 1.0, 5.0), o));  // stage 3
  EXPECT_FALSE(Better(MakeScore(1.0, 0.0, 1.0, 5.0), MakeScore(1.0, 0.0, 1.0, 5.0), o));  // a tie
}

TEST(Score, StageOneServesHigherPrioritiesFirst) {
  const PlannerOptions o;
  // More load in total, but less of the high-priority class: worse.
  EXPECT_FALSE(Better(MakeScore(0.5, 0.9, 0.0, 0.0), MakeScore(0.6, 0.1, 0.0, 0.0), o));
  EXPECT_TRUE(Better(MakeScore(0.6, 0.1, 0.0, 0.0), MakeScore(0.5, 0.9, 0.0, 0.0), o));
  // A class missing from one side serves nothing there.
  Score top;
  top.served_by_priority = {{2, 0.1}};
  EXPECT_TRUE(Better(top, MakeScore(0.9, 0.9, 0.0, 0.0), o));
}

}  // namespace
}  // namespace metronome::planner
