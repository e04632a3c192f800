// The planner adapter: registry jobs in, timetable values out, through the real planner.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "metronome/common/clock.hpp"
#include "metronome/controller/plan_snapshot.hpp"
#include "metronome/controller/planning.hpp"

namespace metronome::controller {
namespace {

PlanJob Job(uint64_t id, std::vector<std::string> nodes, int64_t period, int64_t comm,
            int priority = 1) {
  PlanJob j;
  j.id = id;
  j.name = std::to_string(id);
  j.nodes = std::move(nodes);
  j.profile.period_ns = period;
  j.profile.comm_ns = comm;
  j.priority = priority;
  return j;
}

JobSchedule FindJob(const PlanSummary& s, uint64_t id) {
  for (const auto& j : s.jobs) {
    if (j.id == id) return j;
  }
  ADD_FAILURE() << "job " << id << " is not in the plan";
  return {};
}

// The job's timetable in the plan.
Timetable Find(const PlanSummary& s, uint64_t id) {
  return FindJob(s, id).timetable;
}

TEST(PlanningAdapter, UnknownNodesCrossTheDefaultLinkSingleNodeJobsNone) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  EXPECT_EQ(p.LinkNames(), std::vector<std::string>{"default"});
  EXPECT_EQ(p.JobLinks(Job(1, {"a", "b"}, 100 * kMs, 10 * kMs)), std::vector<uint32_t>{0});
  EXPECT_TRUE(p.JobLinks(Job(1, {"a", "a"}, 100 * kMs, 10 * kMs)).empty());
}

TEST(PlanningAdapter, TwoJobsOnOneLinkGetDisjointWindows) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  p.AddJob(Job(1, {"a", "b"}, 100 * kMs, 40 * kMs, 2));
  p.AddJob(Job(2, {"c", "d"}, 100 * kMs, 50 * kMs, 1));
  const PlanSummary s = p.Summary();
  const Timetable a = Find(s, 1);
  const Timetable b = Find(s, 2);
  EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
  EXPECT_EQ(a.window_ns, 40 * kMs);
  EXPECT_EQ(b.window_ns, 50 * kMs);
  // On the circle of 100 ms: [a, a+40) and [b, b+50) do not intersect.
  const int64_t gap = ((b.offset_ns - a.offset_ns) % (100 * kMs) + 100 * kMs) % (100 * kMs);
  EXPECT_GE(gap, 40 * kMs);
  EXPECT_LE(gap, 50 * kMs);
  ASSERT_EQ(s.links.size(), 1u);
  // Served load: Σ window / period of the gated jobs (periods carry the planning margin).
  EXPECT_NEAR(s.links[0].served_load,
              static_cast<double>(a.window_ns) / static_cast<double>(a.period_ns) +
                  static_cast<double>(b.window_ns) / static_cast<double>(b.period_ns),
              1e-9);
  EXPECT_GE(a.period_ns, 100 * kMs);
  EXPECT_EQ(s.links[0].gated_jobs, 2u);
}

// A job's first window opens at its next phase (scheduler clock, whatever the epoch), so that
// the phase does not wait for it.
TEST(PlanningAdapter, AJobsFirstWindowOpensAtItsNextPhase) {
  PlanningConfig config;
  config.epoch_ns = 7 * kMs;
  PlanningAdapter p(TopologyConfig::Default(), config);
  PlanJob j = Job(1, {"a", "b"}, 100 * kMs, 40 * kMs, 2);
  j.next_phase_ns = 1'000'000 * kMs + 130 * kMs;
  p.AddJob(j);
  const Timetable s = Find(p.Summary(), 1);
  const int64_t opens = p.Summary().epoch_ns + s.offset_ns;
  EXPECT_EQ(((j.next_phase_ns - opens) % s.period_ns + s.period_ns) % s.period_ns, 0);
}

TEST(PlanningAdapter, RemoveKeepsOthersAndBumpsGeneration) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  p.AddJob(Job(1, {"a", "b"}, 100 * kMs, 30 * kMs));
  p.AddJob(Job(2, {"c", "d"}, 100 * kMs, 30 * kMs));
  const Timetable before = Find(p.Summary(), 1);
  const uint64_t g = p.Generation();
  p.RemoveJob(2);
  EXPECT_GT(p.Generation(), g);
  EXPECT_FALSE(p.Contains(2));
  const Timetable after = Find(p.Summary(), 1);
  EXPECT_EQ(after.offset_ns, before.offset_ns);
  EXPECT_EQ(after.period_ns, before.period_ns);
}

// The last leader's plan of two jobs "1" (on a, b) and "2" (on c, d), 100 ms apart.
std::map<std::string, Timetable> LastLeadersPlan() {
  PlanningAdapter old_leader(TopologyConfig::Default(), {});
  old_leader.AddJob(Job(1, {"a", "b"}, 100 * kMs, 30 * kMs));
  old_leader.AddJob(Job(2, {"c", "d"}, 100 * kMs, 30 * kMs));
  return {{"1", Find(old_leader.Summary(), 1)}, {"2", Find(old_leader.Summary(), 2)}};
}

// Job `name` of that plan registering with a new leader as `id`, measured at `period`.
PlanJob Rejoining(uint64_t id, const std::string& name, int64_t period = 100 * kMs) {
  PlanJob j = Job(id, {name == "1" ? "a" : "c", name == "1" ? "b" : "d"}, period, 30 * kMs);
  j.name = name;
  return j;
}

// A scheduler that takes over (Inherit) plans the jobs that register again where the previous
// leader ran them, whatever order they come back in and whatever their new ids; an entry is used
// once, and none after its deadline.
TEST(PlanningAdapter, InheritedJobsKeepTheirSlotsInAnyOrder) {
  const std::map<std::string, Timetable> last = LastLeadersPlan();
  const Timetable ran1 = last.at("1");
  const Timetable ran2 = last.at("2");
  ASSERT_NE(ran1.offset_ns, ran2.offset_ns);

  // Job "2" registers first with the new leader (id 7 there), then job "1" (id 8).
  PlanningAdapter fresh(TopologyConfig::Default(), {});
  fresh.AddJob(Rejoining(7, "2"));
  EXPECT_EQ(Find(fresh.Summary(), 7).offset_ns, ran1.offset_ns)
      << "without the last plan the first job back takes the first slot";

  PlanningAdapter heir(TopologyConfig::Default(), {});
  heir.Inherit({{"1", ran1}, {"2", ran2}},
               std::chrono::steady_clock::now() + std::chrono::hours(1));
  heir.AddJob(Rejoining(7, "2"));
  heir.AddJob(Rejoining(8, "1"));
  EXPECT_EQ(Find(heir.Summary(), 7).offset_ns, ran2.offset_ns);
  EXPECT_EQ(Find(heir.Summary(), 7).period_ns, ran2.period_ns);
  EXPECT_EQ(Find(heir.Summary(), 8).offset_ns, ran1.offset_ns);

  // Used once: job "2" leaving and coming back later is planned as any newcomer.
  heir.RemoveJob(7);
  heir.RemoveJob(8);
  heir.AddJob(Rejoining(9, "2"));
  EXPECT_EQ(Find(heir.Summary(), 9).offset_ns, ran1.offset_ns);

  // Past the deadline the last plan is forgotten.
  PlanningAdapter late(TopologyConfig::Default(), {});
  late.Inherit({{"2", ran2}}, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  late.AddJob(Rejoining(7, "2"));
  EXPECT_EQ(Find(late.Summary(), 7).offset_ns, ran1.offset_ns);
}

// The new leader measures a job again; its first measurement may have set a slightly longer
// period than the job needs now. It stays in the slot it ran in while that slot is free: moving
// to the shorter period would gain a little and lose the takeover's point.
TEST(PlanningAdapter, AnInheritedJobStaysInItsSlotWhenItsPeriodCouldShrink) {
  const std::map<std::string, Timetable> last = LastLeadersPlan();
  const Timetable ran1 = last.at("1");
  const Timetable ran2 = last.at("2");
  constexpr int64_t kMeasuredAgain = 97 * kMs;
  PlanningAdapter fresh(TopologyConfig::Default(), {});
  fresh.AddJob(Rejoining(7, "1", kMeasuredAgain));
  ASSERT_LT(Find(fresh.Summary(), 7).period_ns, ran1.period_ns)
      << "measured again, the job alone would get a shorter period";

  PlanningAdapter heir(TopologyConfig::Default(), {});
  heir.Inherit(last, std::chrono::steady_clock::now() + std::chrono::hours(1));
  heir.AddJob(Rejoining(7, "1", kMeasuredAgain));
  heir.AddJob(Rejoining(8, "2", kMeasuredAgain));
  for (const auto& [id, ran] : {std::pair{7, ran1}, std::pair{8, ran2}}) {
    EXPECT_EQ(Find(heir.Summary(), id).period_ns, ran.period_ns) << "job " << id;
    EXPECT_EQ(Find(heir.Summary(), id).offset_ns, ran.offset_ns) << "job " << id;
  }
}

// The first reports a new leader gets hold the phases of the takeover, when no leader held the
// gates and the jobs collided: a job measured there with a longer phase (and so a longer period)
// than the window it ran in keeps that window and its slot.
TEST(PlanningAdapter, AnInheritedJobKeepsItsWindowWhenItsFirstPhasesHereRanLonger) {
  const std::map<std::string, Timetable> last = LastLeadersPlan();
  PlanningAdapter heir(TopologyConfig::Default(), {});
  heir.Inherit(last, std::chrono::steady_clock::now() + std::chrono::hours(1));
  for (const auto& [id, name] : {std::pair<uint64_t, std::string>{7, "1"}, {8, "2"}}) {
    PlanJob j = Rejoining(id, name, 106 * kMs);
    j.profile.comm_ns = 36 * kMs;
    heir.AddJob(j);
  }
  for (const auto& [id, name] : {std::pair<uint64_t, std::string>{7, "1"}, {8, "2"}}) {
    const Timetable& ran = last.at(name);
    EXPECT_EQ(Find(heir.Summary(), id).period_ns, ran.period_ns) << "job " << name;
    EXPECT_EQ(Find(heir.Summary(), id).offset_ns, ran.offset_ns) << "job " << name;
    EXPECT_EQ(Find(heir.Summary(), id).window_ns, ran.window_ns) << "job " << name;
  }
}

TEST(PlanningAdapter, ExplicitTopologyAndBetaFromBytes) {
  TopologyConfig t;
  t.racks.push_back({"r0", 1e9, {{"n0", 1e9}, {"n1", 1e9}}});
  t.racks.push_back({"r1", 1e9, {{"n2", 1e9}}});
  PlanningAdapter p(t, {});
  EXPECT_EQ(p.LinkNames(), (std::vector<std::string>{"r0/up", "n0/up", "n1/up", "r1/up", "n2/up"}));
  EXPECT_EQ(p.JobLinks(Job(1, {"n0", "n1"}, 100 * kMs, 10 * kMs)), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(p.JobLinks(Job(1, {"n0", "n2"}, 100 * kMs, 10 * kMs)),
            (std::vector<uint32_t>{0, 1, 3, 4}));
  // Two jobs at a quarter of the capacity each may stack in the same window.
  PlanJob a = Job(1, {"n0", "n1"}, 100 * kMs, 80 * kMs);
  PlanJob b = Job(2, {"n0", "n1"}, 100 * kMs, 80 * kMs);
  a.profile.bytes_per_phase = b.profile.bytes_per_phase = 20'000'000;  // 0.25 GB/s over 80 ms
  p.AddJob(a);
  p.AddJob(b);
  const PlanSummary s = p.Summary();
  EXPECT_FALSE(FindJob(s, 1).best_effort);
  EXPECT_FALSE(FindJob(s, 2).best_effort);
}

// An outranking newcomer re-plans its own links only: it takes first pick among the jobs there,
// the lower-priority ones are placed again around it, and jobs elsewhere keep their places and
// cushions. (That this is cheaper than a re-plan of the cluster is measured by
// bench_planning_adapter, not asserted here.)
TEST(PlanningAdapter, OutrankingNewcomerTakesFirstPickOnItsLinksAndTheRestStays) {
  TopologyConfig t;
  t.racks.push_back({"r0", 1e9, {{"n0", 1e9}, {"n1", 1e9}}});
  t.racks.push_back({"r1", 1e9, {{"n2", 1e9}, {"n3", 1e9}}});
  PlanningAdapter p(t, {});
  p.AddJob(Job(1, {"n0", "n1"}, 100 * kMs, 30 * kMs, 0));
  p.AddJob(Job(2, {"n0", "n1"}, 150 * kMs, 30 * kMs, 0));
  p.AddJob(Job(3, {"n2", "n3"}, 100 * kMs, 40 * kMs, 0));
  p.AddJob(Job(4, {"n2", "n3"}, 120 * kMs, 40 * kMs, 0));
  const PlanSummary before = p.Summary();
  // Job 5 outranks jobs 1 and 2 on rack r0's nodes and wants the window job 1 holds.
  PlanningAdapter first_alone(t, {});
  first_alone.AddJob(Job(5, {"n0", "n1"}, 100 * kMs, 30 * kMs, 5));
  p.AddJobs({Job(5, {"n0", "n1"}, 100 * kMs, 30 * kMs, 5)});
  const PlanSummary after = p.Summary();
  for (uint64_t id : {3u, 4u}) {
    EXPECT_EQ(Find(after, id).period_ns, Find(before, id).period_ns) << id;
    EXPECT_EQ(Find(after, id).offset_ns, Find(before, id).offset_ns) << id;
    EXPECT_EQ(Find(after, id).late_slack_ns, Find(before, id).late_slack_ns) << id;
  }
  // The newcomer got first pick: the period it would get alone, gated.
  EXPECT_FALSE(FindJob(after, 5).best_effort);
  EXPECT_EQ(Find(after, 5).period_ns, Find(first_alone.Summary(), 5).period_ns);
  // Its lower-priority neighbours are still planned around it: gated, or ungated where waiting
  // for its windows costs them less than a stretch would, and then yielding to them.
  for (uint64_t id : {1u, 2u}) {
    const JobSchedule j = FindJob(after, id);
    if (!j.best_effort) continue;
    ASSERT_NE(j.yields, nullptr) << id;
    ASSERT_EQ(j.yields->count, 1u) << id;
    EXPECT_EQ(j.yields->windows[0].period_ns, Find(after, 5).period_ns) << id;
  }
}

TEST(PlanningAdapter, InvalidJobIsRefusedWithAReason) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  EXPECT_THROW(p.AddJob(Job(1, {"a", "b"}, 0, 0)), PlanningError);
  // A period of 1 ns (admitted by the protocol as a measurement) is no rhythm: planned, it made
  // the planner list its windows by the billion on its neighbour's link.
  EXPECT_THROW(p.AddJob(Job(2, {"a", "b"}, 1, 1)), PlanningError);
  EXPECT_THROW(p.AddJob(Job(3, {"a", "b"}, 99'999, 50'000)), PlanningError);
}

TEST(PlanningAdapter, WhatIfNamesTheCandidateAndAffectedJobs) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  p.AddJob(Job(1, {"a", "b"}, 100 * kMs, 60 * kMs, 2));
  const auto fits = p.WhatIf(Job(99, {"c", "d"}, 100 * kMs, 30 * kMs), {{1, "big"}});
  ASSERT_FALSE(fits.empty());
  EXPECT_TRUE(fits[0].candidate);
  EXPECT_FALSE(fits[0].best_effort_after);
  const auto crowded = p.WhatIf(Job(99, {"c", "d"}, 100 * kMs, 90 * kMs, 0), {{1, "big"}});
  ASSERT_FALSE(crowded.empty());
  EXPECT_TRUE(crowded[0].best_effort_after);
}

TEST(PlanningAdapter, OfflineSearchRunsOnACopyAndIsAdoptedOnlyIfCurrent) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  const std::vector<std::vector<std::string>> nodes = {
      {"a1", "b1"}, {"a2", "b2"}, {"a3", "b3"}, {"a4", "b4"}};
  for (uint64_t i = 1; i <= 4; ++i) {
    p.AddJob(Job(i, nodes[i - 1], 100 * kMs * static_cast<int64_t>(i), 20 * kMs));
  }
  auto task = p.PrepareOffline();
  const OfflineResult r = PlanningAdapter::RunOffline(*task, 50, {});
  EXPECT_EQ(r.generation, p.Generation());
  EXPECT_FALSE(r.summary.empty());
  using A = PlanningAdapter::Adoption;
  if (r.improved) {
    if (!r.moved.empty()) {
      EXPECT_EQ(p.AdoptOffline(r, 0), A::kTooDisruptive);
    }
    p.RemoveJob(4);  // the jobs changed meanwhile: a stale result is refused
    EXPECT_EQ(p.AdoptOffline(r, 100), A::kStale);
  } else {
    EXPECT_EQ(p.AdoptOffline(r, 100), A::kNoGain);
  }
}

TEST(PlanningAdapter, TheDemosHighPriorityJobJoiningLastLeavesTheLowPriorityOneGated) {
  // The CPU testbed demo (examples/scenarios/testbed-small.yaml): two racks behind 25 MB/s
  // uplinks, jobs 1 (high) and 2 (normal) with 4 MiB all-reduces (170 ms windows, ~485 ms
  // periods), job 3 (low) with 0.5 MiB every ~228 ms. Job 1 joins last and outranks the others,
  // so the adapter re-plans its component with the current plan. Job 3 fits gated at half the
  // others' period; the re-plan used to leave it best-effort (ungated) until it was added again.
  TopologyConfig t;
  t.racks.push_back({"r1", 25e6, {{"h1", 125e6}, {"h2", 125e6}, {"h3", 125e6}}});
  t.racks.push_back({"r2", 25e6, {{"h4", 125e6}, {"h5", 125e6}, {"h6", 125e6}}});
  PlanningAdapter p(t, {});
  auto mk = [](uint64_t id, std::string a, std::string b, int prio, int64_t compute,
               uint64_t bytes) {
    PlanJob j = Job(id, {std::move(a), std::move(b)}, compute + 200 * kMs, 200 * kMs, prio);
    j.profile.bytes_per_phase = bytes;
    j.profile.compute_ns = compute;
    j.profile.min_comm_ns = 170 * kMs;
    j.profile.jitter_ns = 1 * kMs;
    return j;
  };
  PlanJob j3 = mk(3, "h3", "h6", 0, 200 * kMs, 524'288);
  j3.profile.period_ns = 250 * kMs;
  j3.profile.comm_ns = 50 * kMs;
  j3.profile.min_comm_ns = 40 * kMs;
  p.AddJobs({mk(2, "h2", "h5", 1, 301 * kMs, 4'194'304)});
  p.AddJobs({j3});
  p.AddJobs({mk(1, "h1", "h4", 2, 301 * kMs, 4'194'304)});
  const PlanSummary s = p.Summary();
  const Timetable high = Find(s, 1);
  const Timetable normal = Find(s, 2);
  const Timetable low = Find(s, 3);
  EXPECT_FALSE(FindJob(s, 1).best_effort);
  EXPECT_FALSE(FindJob(s, 2).best_effort);
  ASSERT_FALSE(FindJob(s, 3).best_effort);
  EXPECT_EQ(low.period_ns * 2, high.period_ns);
  EXPECT_LT(low.window_ns, low.period_ns);
  // Stage 3 spreads the slack over all three, the high-priority job not left at its minimum.
  EXPECT_GT(high.late_slack_ns, 3 * kMs);
  EXPECT_GT(normal.late_slack_ns, 3 * kMs);
}

}  // namespace
}  // namespace metronome::controller

namespace metronome::controller {
namespace {

// Two jobs measured 0.2 % apart share a link: they are planned at one period (the larger) and
// take turns, whichever joins first; without that, the slower one could only take twice the
// other's period.
TEST(PlanningAdapter, NearlyEqualPeriodsOnASharedLinkArePlannedAtOnePeriod) {
  for (const bool faster_first : {true, false}) {
    PlanningAdapter p(TopologyConfig::Default(), {});
    const PlanJob fast = Job(1, {"a", "b"}, 494'900'000, 180 * kMs, 2);
    const PlanJob slow = Job(2, {"c", "d"}, 495'900'000, 180 * kMs, 1);
    p.AddJobs({faster_first ? fast : slow});
    p.AddJobs({faster_first ? slow : fast});
    const PlanSummary s = p.Summary();
    const Timetable a = Find(s, 1), b = Find(s, 2);
    EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort) << faster_first;
    EXPECT_EQ(a.period_ns, b.period_ns) << faster_first;
    EXPECT_LT(b.period_ns, 510 * kMs) << faster_first;  // not doubled
  }
}

// Two jobs whose phases take about half their period (240 ms every 500 ms, σ = 5 ms: 15 ms
// cushions, 1 % headroom) overflow their 505 ms period by their cushions: through the service's
// conversion too, both are gated at one period stretched by the least that fits (2 %), instead
// of the second running ungated.
TEST(PlanningAdapter, TwoHalfDutyJobsTakeTurnsAtOneSlightlyStretchedPeriod) {
  PlanningAdapter p(TopologyConfig::Default(), {});
  PlanJob a = Job(1, {"a", "b"}, 500 * kMs, 240 * kMs);
  PlanJob b = Job(2, {"c", "d"}, 500 * kMs, 240 * kMs);
  a.profile.jitter_ns = b.profile.jitter_ns = 5 * kMs;
  p.AddJobs({a});
  p.AddJobs({b});
  const PlanSummary s = p.Summary();
  EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
  EXPECT_EQ(Find(s, 1).period_ns, Find(s, 2).period_ns);
  EXPECT_GE(Find(s, 1).period_ns, 510 * kMs);
  EXPECT_LT(Find(s, 1).period_ns, 520 * kMs);
}

}  // namespace
}  // namespace metronome::controller

namespace metronome::controller {
namespace {

// Two copies of one model on a shared 25 MB/s link, 4 MiB per all-reduce: the window of a
// saturating job is the wire time of its bytes, so the copy that happened to run a faster phase
// gets the same window and period as the other (periods 1.2 % apart could not interleave).
PlanJob Saturating(uint64_t id, std::string a, std::string b, int64_t fastest) {
  PlanJob j;
  j.id = id;
  j.name = std::to_string(id);
  j.nodes = {std::move(a), std::move(b)};
  j.profile.period_ns = 500 * kMs;
  j.profile.comm_ns = 200 * kMs;
  j.profile.compute_ns = 300 * kMs;
  j.profile.min_comm_ns = fastest;
  j.profile.bytes_per_phase = 4'194'304;
  j.profile.jitter_ns = 1 * kMs;
  return j;
}

TopologyConfig TwoRacks() {
  TopologyConfig t;
  t.racks.push_back({"r1", 25e6, {{"h1", 125e6}, {"h2", 125e6}}});
  t.racks.push_back({"r2", 25e6, {{"h3", 125e6}, {"h4", 125e6}}});
  return t;
}

TEST(PlanningAdapter, SaturatingJobsWindowIsTheWireTimeWhateverTheFastestPhase) {
  PlanningAdapter p(TwoRacks(), {});
  p.AddJobs({Saturating(1, "h1", "h3", 180 * kMs), Saturating(2, "h2", "h4", 200 * kMs)});
  const PlanSummary s = p.Summary();
  EXPECT_EQ(Find(s, 1).window_ns, Find(s, 2).window_ns);
  EXPECT_EQ(Find(s, 1).period_ns, Find(s, 2).period_ns);
  EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
}

// Two copies of one model, one of whose medians shows the collisions it ran into ungated (200 ms
// for 167.8 ms on the wire: the full 15 % margin) while the other's ran clean in its window
// (177 ms: 9 %). The copies share the clean margin: one window, one period, both gated, in
// whichever order their reports arrive, and the clean copy is not stretched. With its own margin
// the collided copy's period (493 ms before the planner's headroom, against 483) was longer than
// the other's: here, at equal priority, the clean copy was stretched to it; on the testbed, where
// the clean copy outranked it, the collided one was left ungated and never fit beside it again.
TEST(PlanningAdapter, CopiesShareTheLeastMarginAnyOfThemShows) {
  const auto copy = [](uint64_t id, std::string a, std::string b, int64_t median) {
    PlanJob j = Saturating(id, std::move(a), std::move(b), 175 * kMs);
    j.profile.comm_ns = median;
    j.profile.period_ns = 300 * kMs + median;
    return j;
  };
  const double wire_ns = 4'194'304 / 25e6 * 1e9;
  {
    PlanningAdapter p(TwoRacks(), {});
    (void)p.AddJobs({copy(1, "h1", "h3", 177 * kMs)});
    (void)p.AddJobs({copy(2, "h2", "h4", 200 * kMs)});
    const PlanSummary s = p.Summary();
    EXPECT_NEAR(static_cast<double>(Find(s, 2).window_ns), wire_ns * 1.09, 1e3);
    EXPECT_EQ(Find(s, 1).window_ns, Find(s, 2).window_ns);
    EXPECT_EQ(Find(s, 1).period_ns, Find(s, 2).period_ns);
    EXPECT_LT(Find(s, 1).period_ns, 493 * kMs);
    EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
  }
  {
    // Both collided first; then the first copy's phases run clean, and the other reports again.
    PlanningAdapter p(TwoRacks(), {});
    (void)p.AddJobs({copy(1, "h1", "h3", 200 * kMs), copy(2, "h2", "h4", 200 * kMs)});
    (void)p.AddJobs({copy(1, "h1", "h3", 177 * kMs)});
    (void)p.AddJobs({copy(2, "h2", "h4", 200 * kMs)});
    const PlanSummary s = p.Summary();
    EXPECT_EQ(Find(s, 1).window_ns, Find(s, 2).window_ns);
    EXPECT_EQ(Find(s, 1).period_ns, Find(s, 2).period_ns);
    EXPECT_LT(Find(s, 1).period_ns, 493 * kMs);
    EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
  }
  // A job of other bytes is no copy: it keeps the margin its own phases show.
  PlanningAdapter p(TwoRacks(), {});
  PlanJob other = copy(2, "h2", "h4", 240 * kMs);
  other.profile.bytes_per_phase = 5'000'000;
  (void)p.AddJobs({copy(1, "h1", "h3", 177 * kMs)});
  (void)p.AddJobs({other});
  EXPECT_NEAR(static_cast<double>(Find(p.Summary(), 2).window_ns), 5e6 / 25e6 * 1.15 * 1e9, 1e3);
}

// Phases that took longer than the wire time in a gated window (the controller's overrun rule)
// widen the window to what they take, and the period by as much; without a floor, or with one
// below the wire time, the window is the wire time.
TEST(PlanningAdapter, APhaseFloorWidensTheWindowAndThePeriod) {
  PlanningAdapter p(TwoRacks(), {});
  PlanJob slowed = Saturating(1, "h1", "h3", 180 * kMs);
  slowed.profile.phase_floor_ns = 250 * kMs;
  PlanJob below = Saturating(2, "h2", "h4", 180 * kMs);
  below.profile.phase_floor_ns = 100 * kMs;
  p.AddJobs({below, slowed});
  const PlanSummary s = p.Summary();
  // 4 MiB over a 25 MB/s uplink, plus the wire margin.
  const double wire_ns = 4'194'304 / 25e6 * (1.0 + PlanningConfig{}.wire_margin) * 1e9;
  EXPECT_NEAR(static_cast<double>(Find(s, 2).window_ns), wire_ns, 1e3);
  EXPECT_EQ(Find(s, 1).window_ns, 250 * kMs);
  EXPECT_GE(Find(s, 1).period_ns, 300 * kMs + 250 * kMs);
  EXPECT_LT(Find(s, 1).period_ns, 300 * kMs + 250 * kMs + 30 * kMs);
}

// A saturating job's window is its wire time and the configured margin (15 %), or less where its
// median phase shows less overhead: that median and 2 %, rounded up to a multiple of 3 %. Two
// copies whose medians differ a little get the same window.
TEST(ToPlannerProfile, ASaturatingJobWhosePhasesRunCleanGetsTheMarginTheyShow) {
  MeasuredProfile m;
  m.period_ns = 480 * kMs;
  m.compute_ns = 300 * kMs;
  m.bytes_per_phase = 4'194'304;
  m.min_comm_ns = 175 * kMs;
  m.jitter_ns = 1 * kMs;
  const double wire_ns = 4'194'304 / 25e6 * 1e9;  // 167.8 ms
  auto window = [&](int64_t median) {
    m.comm_ns = median;
    return static_cast<double>(ToPlannerProfile(m, 2, 25e6, PlanningConfig{}).comm_ns);
  };
  EXPECT_NEAR(window(175 * kMs), wire_ns * 1.09, 1e3);  // 4.3 % shown
  EXPECT_NEAR(window(177 * kMs), wire_ns * 1.09, 1e3);  // 5.5 % shown
  EXPECT_NEAR(window(182 * kMs), wire_ns * 1.12, 1e3);  // 8.5 % shown
  EXPECT_NEAR(window(200 * kMs), wire_ns * 1.15, 1e3);  // more than the configured margin
  EXPECT_NEAR(window(0), wire_ns * 1.15, 1e3);          // no median yet
  EXPECT_NEAR(window(150 * kMs), wire_ns, 1e3);         // never under the wire time
  // The period is the compute and that window, rounded up to a millisecond.
  m.comm_ns = 177 * kMs;
  EXPECT_EQ(ToPlannerProfile(m, 2, 25e6, PlanningConfig{}).period_ns, 483 * kMs);
}

// The most bytes a report admits (1 PiB) on the slowest link a topology admits: a window longer
// than a timetable's longest period is planned at that period, not converted out of range.
TEST(ToPlannerProfile, AWireTimeBeyondAnHourIsPlannedAtAnHour) {
  MeasuredProfile m;
  m.period_ns = 1'000 * kMs;
  m.comm_ns = 100 * kMs;
  m.bytes_per_phase = uint64_t{1} << 50;
  for (const double link : {125'000.0, 12.5e9}) {  // 1 Mbit/s, 100 Gbit/s
    const planner::JobProfile p = ToPlannerProfile(m, 4, link, PlanningConfig{});
    EXPECT_LE(p.period_ns, TimetableLimits{}.max_period_ns) << link;
    EXPECT_GT(p.comm_ns, 0) << link;
    EXPECT_LE(p.comm_ns, p.period_ns) << link;
  }
}

// A jitter of 0 is one the shims have not measured yet: the job is planned with 1 % of its
// period until they have; a measured one is taken as it is.
TEST(ToPlannerProfile, AnUnmeasuredJitterIsOnePercentOfThePeriod) {
  MeasuredProfile m;
  m.period_ns = 500 * kMs;
  m.comm_ns = 100 * kMs;
  const planner::JobProfile unmeasured = ToPlannerProfile(m, 2, 25e6, PlanningConfig{});
  EXPECT_EQ(unmeasured.period_ns, 500 * kMs);
  EXPECT_EQ(unmeasured.jitter_ns, 5 * kMs);
  m.jitter_ns = 300'000;
  EXPECT_EQ(ToPlannerProfile(m, 2, 25e6, PlanningConfig{}).jitter_ns, 300'000);
}

// The demo's three jobs, in the order they were first planned: a small low-priority job, then the
// high-priority copy of a model that reported no jitter yet (too few samples), then the other
// copy. Both copies get the planner's headroom and one period; neither is stretched to twice it.
TEST(PlanningAdapter, ACopyThatReportedNoJitterGetsTheSamePeriod) {
  PlanningAdapter p(TwoRacks(), {});
  PlanJob small = Saturating(3, "h1", "h3", 20 * kMs);
  small.profile.period_ns = 222 * kMs;
  small.profile.compute_ns = 200 * kMs;
  small.profile.comm_ns = 22 * kMs;
  small.profile.bytes_per_phase = 524'288;
  small.priority = 0;
  PlanJob calm = Saturating(1, "h1", "h3", 180 * kMs);
  calm.profile.jitter_ns = 0;
  calm.priority = 2;
  PlanJob jittery = Saturating(2, "h2", "h4", 180 * kMs);
  jittery.priority = 1;
  p.AddJobs({small});
  p.AddJobs({calm});
  p.AddJobs({jittery});
  const PlanSummary s = p.Summary();
  EXPECT_EQ(Find(s, 1).period_ns, Find(s, 2).period_ns);
  EXPECT_LT(Find(s, 2).period_ns, 600 * kMs);  // not doubled
  EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
}

// A re-plan whose profile converts to the same planner job (here only its fastest phase and
// its compute by 10 µs moved, which leaves its period on the same millisecond of the planner's
// grid) is skipped: no job moves, the plan's generation stays.
TEST(PlanningAdapter, ReplanWithUnchangedPlannerInputsMovesNothing) {
  PlanningAdapter p(TwoRacks(), {});
  p.AddJobs({Saturating(1, "h1", "h3", 200 * kMs), Saturating(2, "h2", "h4", 200 * kMs)});
  const PlanSummary before = p.Summary();
  const uint64_t generation = p.Generation();
  PlanJob again = Saturating(1, "h1", "h3", 178 * kMs);
  again.profile.compute_ns -= 10'000;
  EXPECT_TRUE(p.AddJobs({again}).empty());
  EXPECT_EQ(p.Generation(), generation);
  const PlanSummary after = p.Summary();
  for (uint64_t id : {1u, 2u}) {
    EXPECT_EQ(Find(after, id).offset_ns, Find(before, id).offset_ns) << id;
    EXPECT_EQ(Find(after, id).period_ns, Find(before, id).period_ns) << id;
  }
  // A real change is planned.
  PlanJob slower = Saturating(1, "h1", "h3", 200 * kMs);
  slower.profile.compute_ns = 400 * kMs;
  (void)p.AddJobs({slower});
  EXPECT_GT(p.Generation(), generation);
  EXPECT_GT(Find(p.Summary(), 1).period_ns, Find(before, 1).period_ns);
}

// The overrun rule widens a gated window (PlanJob::phase_floor_ns), which lengthens the job's
// period by as much. Two jobs on the 25 MB/s uplinks, 240 and 200 ms on the wire every 500 ms.
// The high-priority job's wider window is taken: its lower-priority neighbour follows it to the
// new period. The lower-priority job's (230 ms) is not: beside the other's 240 ms windows every
// 505 ms it would fit only at twice the period (1010 ms), so the plan stays as it was.
PlanJob Wired(uint64_t id, std::string a, std::string b, int64_t wire_ms, int priority) {
  PlanJob j;
  j.id = id;
  j.name = std::to_string(id);
  j.nodes = {std::move(a), std::move(b)};
  j.priority = priority;
  j.profile.period_ns = 500 * kMs;
  j.profile.comm_ns = wire_ms * kMs;
  j.profile.compute_ns = (500 - wire_ms) * kMs;
  j.profile.min_comm_ns = wire_ms * kMs;
  j.profile.bytes_per_phase =
      static_cast<uint64_t>(static_cast<double>(wire_ms) / 1e3 / 1.1 * 25e6);
  j.profile.jitter_ns = 5 * kMs;
  return j;
}

TEST(PlanningAdapter, AWiderWindowIsTakenUnlessItWouldStretchThePeriod) {
  {
    PlanningAdapter p(TwoRacks(), {});
    PlanJob high = Wired(1, "h1", "h3", 240, 3);
    p.AddJobs({high, Wired(2, "h2", "h4", 200, 1)});
    high.profile.phase_floor_ns = 270 * kMs;
    EXPECT_TRUE(p.WidenWindow(high));
    const PlanSummary s = p.Summary();
    EXPECT_EQ(Find(s, 1).window_ns, 270 * kMs);
    EXPECT_FALSE(FindJob(s, 1).best_effort || FindJob(s, 2).best_effort);
    EXPECT_EQ(Find(s, 2).period_ns, Find(s, 1).period_ns);
    EXPECT_LT(Find(s, 1).period_ns, 540 * kMs);  // 260 + 270 ms and the 1 % headroom
  }
  {
    PlanningAdapter p(TwoRacks(), {});
    PlanJob low = Wired(2, "h2", "h4", 200, 1);
    p.AddJobs({Wired(1, "h1", "h3", 240, 3), low});
    const PlanSummary before = p.Summary();
    const uint64_t generation = p.Generation();
    low.profile.phase_floor_ns = 230 * kMs;
    EXPECT_FALSE(p.WidenWindow(low));
    const PlanSummary after = p.Summary();
    for (const uint64_t id : {1u, 2u}) {
      EXPECT_FALSE(FindJob(after, id).best_effort) << id;
      EXPECT_EQ(Find(after, id).period_ns, Find(before, id).period_ns) << id;
      EXPECT_EQ(Find(after, id).offset_ns, Find(before, id).offset_ns) << id;
      EXPECT_EQ(Find(after, id).window_ns, Find(before, id).window_ns) << id;
    }
    EXPECT_GT(p.Generation(), generation);
  }
}

// The service plans jobs that share no link in adapters of their own (its planning parts): the
// plans must be those one adapter makes of them all, and moving jobs from one adapter to another
// must leave them in their slots.
TEST(PlanningAdapter, DisjointPartsArePlannedAsOneAdapterPlansThem) {
  TopologyConfig topo;
  topo.unknown_nodes_link.clear();
  topo.two_tier = TopologyConfig::TwoTier{4, 4, 1.25e9, 2.5e9};
  // Group 0 on racks 0 and 1, group 1 on racks 2 and 3: no link in common.
  const auto job = [](uint64_t id) {
    const int group = static_cast<int>(id % 2);
    const std::string r0 = "r" + std::to_string(2 * group);
    const std::string r1 = "r" + std::to_string(2 * group + (id % 3 == 0 ? 0 : 1));
    return Job(id, {r0 + "n" + std::to_string(id % 4), r1 + "n" + std::to_string((id / 4) % 4)},
               (150 + 13 * static_cast<int64_t>(id % 7)) * kMs,
               (15 + 5 * static_cast<int64_t>(id % 5)) * kMs, 1 + static_cast<int>(id % 3));
  };
  PlanningAdapter whole(topo, {});
  PlanningAdapter part0(topo, {});
  PlanningAdapter part1(topo, {});
  PlanningAdapter* parts[2] = {&part0, &part1};
  for (uint64_t first = 1; first <= 24; first += 6) {  // four rounds of six joins
    std::vector<PlanJob> batch;
    std::vector<PlanJob> by_part[2];
    for (uint64_t id = first; id < first + 6; ++id) {
      batch.push_back(job(id));
      by_part[id % 2].push_back(job(id));
    }
    ASSERT_TRUE(whole.AddJobs(batch).empty());
    for (int g = 0; g < 2; ++g) ASSERT_TRUE(parts[g]->AddJobs(by_part[g]).empty());
  }
  for (const uint64_t id : {5u, 8u}) {
    whole.RemoveJob(id);
    parts[id % 2]->RemoveJob(id);
  }
  const PlanSummary all = whole.Summary();
  ASSERT_EQ(all.jobs.size(), 22u);
  size_t planned = 0;  // gated, or yielding to a gated window
  for (int g = 0; g < 2; ++g) {
    for (const JobSchedule& s : parts[g]->Summary().jobs) {
      const JobSchedule w = FindJob(all, s.id);
      EXPECT_EQ(w.timetable, s.timetable) << "job " << s.id;
      EXPECT_EQ(w.best_effort, s.best_effort) << "job " << s.id;
      planned += (!s.best_effort && !AlwaysOpen(s.timetable)) || s.yields != nullptr ? 1 : 0;
    }
  }
  EXPECT_GT(planned, 4u);  // the jobs meet on their links: a plan, not just open windows

  // Group 1 moves out of the whole into its own adapter: every job keeps its slot.
  std::vector<uint64_t> group1;
  for (const JobSchedule& s : all.jobs) {
    if (s.id % 2 == 1) group1.push_back(s.id);
  }
  PlanningAdapter moved(topo, {});
  moved.Import(*whole.Extract(group1));
  const PlanSummary rest = whole.Summary();
  const PlanSummary there = moved.Summary();
  EXPECT_EQ(rest.jobs.size() + there.jobs.size(), all.jobs.size());
  for (const JobSchedule& s : there.jobs) {
    EXPECT_EQ(s.id % 2, 1u);
    EXPECT_EQ(s.timetable, FindJob(all, s.id).timetable) << "job " << s.id;
  }
  for (const JobSchedule& s : rest.jobs) {
    EXPECT_EQ(s.timetable, FindJob(all, s.id).timetable) << "job " << s.id;
  }
}

// A round that yields (the service's, after its share of time) places at least one job, the
// jobs of small groups first within a priority, and leaves the rest for its next round.
TEST(PlanningAdapter, AYieldingBatchPlacesSmallGroupsFirstAndDefersTheRest) {
  TopologyConfig topo;
  topo.unknown_nodes_link.clear();
  topo.two_tier = TopologyConfig::TwoTier{4, 4, 1.25e9, 2.5e9};
  PlanningAdapter p(topo, {});
  std::vector<PlanJob> batch;
  for (uint64_t id = 1; id <= 5; ++id) {  // a burst across racks 0 and 1: one group
    batch.push_back(Job(id, {"r0n" + std::to_string(id % 4), "r1n" + std::to_string(id % 4)},
                        200 * kMs, 20 * kMs));
  }
  batch.push_back(Job(9, {"r3n0", "r3n1"}, 200 * kMs, 20 * kMs));  // alone, arrived last
  std::vector<uint64_t> deferred;
  const auto refused = p.AddJobs(
      batch, [] { return true; }, &deferred);
  EXPECT_TRUE(refused.empty());
  EXPECT_TRUE(p.Contains(9));  // placed first: its group is the smaller
  EXPECT_EQ(deferred, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  for (uint64_t id = 1; id <= 5; ++id) EXPECT_FALSE(p.Contains(id));

  // A higher priority goes first whatever the groups; without a yield the whole batch is placed.
  PlanningAdapter q(topo, {});
  batch.back().priority = 0;
  deferred.clear();
  EXPECT_TRUE(q.AddJobs(
                   batch, [] { return true; }, &deferred)
                  .empty());
  EXPECT_TRUE(q.Contains(1));  // the first of the burst, which outranks the lone job now
  EXPECT_EQ(deferred, (std::vector<uint64_t>{2, 3, 4, 5, 9}));
  EXPECT_TRUE(q.AddJobs(batch).empty());
  for (const PlanJob& j : batch) EXPECT_TRUE(q.Contains(j.id));
}

// A round that may yield ends before a group larger than any it placed, even with time left:
// the lone join is pushed without waiting for the burst's share. Groups of one size, and a
// smaller group after a larger one, go on in the same round.
TEST(PlanningAdapter, AYieldingBatchEndsBeforeALargerGroup) {
  TopologyConfig topo;
  topo.unknown_nodes_link.clear();
  topo.two_tier = TopologyConfig::TwoTier{4, 4, 1.25e9, 2.5e9};
  const auto never = [] { return false; };
  std::vector<PlanJob> burst;
  for (uint64_t id = 1; id <= 5; ++id) {  // one group across racks 0 and 1
    burst.push_back(Job(id, {"r0n" + std::to_string(id % 4), "r1n" + std::to_string(id % 4)},
                        200 * kMs, 20 * kMs));
  }
  const PlanJob lone = Job(9, {"r3n0", "r3n1"}, 200 * kMs, 20 * kMs);
  const PlanJob other = Job(8, {"r2n0", "r2n1"}, 200 * kMs, 20 * kMs);

  PlanningAdapter p(topo, {});
  std::vector<PlanJob> batch = burst;
  batch.push_back(lone);
  batch.push_back(other);
  std::vector<uint64_t> deferred;
  EXPECT_TRUE(p.AddJobs(batch, never, &deferred).empty());
  EXPECT_TRUE(p.Contains(9));
  EXPECT_TRUE(p.Contains(8));  // a group of the same size: the same round
  EXPECT_EQ(deferred, (std::vector<uint64_t>{1, 2, 3, 4, 5}));

  // The burst outranks the lone jobs: placed first, and the smaller groups after it.
  PlanningAdapter q(topo, {});
  for (PlanJob& j : batch) j.priority = j.id < 8 ? 2 : 1;
  deferred.clear();
  EXPECT_TRUE(q.AddJobs(batch, never, &deferred).empty());
  EXPECT_TRUE(deferred.empty());
  for (const PlanJob& j : batch) EXPECT_TRUE(q.Contains(j.id));

  // A planned neighbour of higher priority whose period follows a newcomer's is placed again
  // first, in the newcomer's group: the newcomer is not a larger group after it.
  PlanningAdapter r(topo, {});
  PlanJob above = Job(20, {"r0n0", "r1n0"}, 199 * kMs, 20 * kMs);
  above.priority = 2;
  ASSERT_TRUE(r.AddJobs({above}).empty());
  PlanJob newcomer = Job(21, {"r0n0", "r1n0"}, 200 * kMs, 20 * kMs);
  newcomer.priority = 1;
  deferred.clear();
  EXPECT_TRUE(r.AddJobs({newcomer}, never, &deferred).empty());
  EXPECT_TRUE(deferred.empty());
  EXPECT_TRUE(r.Contains(21));
}

}  // namespace
}  // namespace metronome::controller
