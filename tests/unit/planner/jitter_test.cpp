// Cushions against jitter, the period headroom of stop-and-wait, the cushion switch (the
// no-cushion ablation) and nearly equal periods. Every plan goes through the checker.
#include <gtest/gtest.h>

#include <tuple>

#include "metronome/planner/planner.hpp"
#include "metronome/planner/ranked_yields.hpp"
#include "metronome/planner/what_if.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::Entry;
using testing::kMs;
using testing::MakeJob;

Job WithJitter(Job j, Nanos sigma_ms) {
  j.profile.jitter_ns = sigma_ms * kMs;
  return j;
}

TEST(Jitter, WindowsKeepTheMinimumCushionEvenWithoutStage3) {
  // Three 20 ms windows every 100 ms: 40 ms to spare. Packed against each other they would
  // leave 0 between the first two; a 10 ms minimum cushion keeps every gap at 10 ms or more.
  const Problem p{
      testing::Links(1),
      {MakeJob(1, 0, 100, 20, {0}), MakeJob(2, 0, 100, 20, {0}), MakeJob(3, 0, 100, 20, {0})}};
  for (const int sweeps : {0, 2}) {
    PlannerOptions o;
    o.min_cushion_ns = 10 * kMs;
    o.cushion_sweeps = sweeps;
    const Plan plan = planner::MakePlan(p, o);
    EXPECT_FEASIBLE(p, plan);  // the checker verifies that each late slack is really free
    for (const JobId id : {1, 2, 3}) {
      EXPECT_FALSE(Entry(plan, id).best_effort) << id;
      EXPECT_GE(Entry(plan, id).timetable.late_slack_ns, 10 * kMs) << id << " sweeps " << sweeps;
    }
    EXPECT_GE(plan.links[0].min_cushion_ns, 10 * kMs);
  }
}

TEST(Jitter, TheCushionGrowsWithTheJobsJitter) {
  // σ = 5 ms: each window reserves 3σ = 15 ms after it.
  const Problem alone{testing::Links(1),
                      {WithJitter(MakeJob(1, 0, 100, 30, {0}), 5), MakeJob(2, 0, 100, 30, {0})}};
  PlannerOptions o;
  o.cushion_sweeps = 0;
  o.jitter_headroom = 0;
  const Plan plan = planner::MakePlan(alone, o);
  EXPECT_FEASIBLE(alone, plan);
  EXPECT_GE(Entry(plan, 1).timetable.late_slack_ns, 15 * kMs);
  // Two 40 ms windows with σ = 5 ms need 2·(40 + 15) = 110 ms: they no longer fit into 100 ms
  // side by side, so the second is not gated at 100 ms.
  const Problem tight{
      testing::Links(1),
      {WithJitter(MakeJob(1, 1, 100, 40, {0}), 5), WithJitter(MakeJob(2, 0, 100, 40, {0}), 5)}};
  const Plan t = planner::MakePlan(tight, o);
  EXPECT_FEASIBLE(tight, t);
  EXPECT_FALSE(Entry(t, 1).best_effort);
  EXPECT_TRUE(Entry(t, 2).best_effort || Entry(t, 2).timetable.period_ns > 100 * kMs);
  // Without jitter they fit (80 of 100 ms).
  const Problem calm{testing::Links(1), {MakeJob(1, 1, 100, 40, {0}), MakeJob(2, 0, 100, 40, {0})}};
  const Plan c = planner::MakePlan(calm, o);
  EXPECT_FALSE(Entry(c, 2).best_effort);
  EXPECT_EQ(Entry(c, 2).timetable.period_ns, 100 * kMs);
}

TEST(Jitter, AGatedPeriodHasHeadroomForTheJitter) {
  const Problem p{testing::Links(1),
                  {WithJitter(MakeJob(1, 0, 100, 30, {0}), 2), MakeJob(2, 0, 100, 30, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  // σ = 2 ms: at least 102 ms, so that a late phase drifts back into its slack.
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, 102 * kMs);
  EXPECT_NEAR(Entry(plan, 1).predicted_slowdown, 0.02, 1e-9);
  PlannerOptions none;
  none.jitter_headroom = 0;
  EXPECT_EQ(Entry(planner::MakePlan(p, none), 1).timetable.period_ns, 100 * kMs);
}

TEST(Jitter, CushionSwitchOffPacksWindowsWithNoLateSlack) {
  const Problem p{
      testing::Links(1),
      {WithJitter(MakeJob(1, 0, 100, 40, {0}), 2), WithJitter(MakeJob(2, 0, 100, 50, {0}), 2)}};
  PlannerOptions o;
  o.cushion = false;
  o.min_cushion_ns = 5 * kMs;  // ignored: the switch turns every cushion off
  const Plan plan = planner::MakePlan(p, o);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& a = Entry(plan, 1);
  const JobPlan& b = Entry(plan, 2);
  EXPECT_EQ(a.timetable.late_slack_ns, 0);
  EXPECT_EQ(b.timetable.late_slack_ns, 0);
  EXPECT_EQ(a.timetable.period_ns, b.timetable.period_ns);
  // Packed: one window starts where the other ends.
  const Nanos t = a.timetable.period_ns;
  const Nanos d = ((b.timetable.offset_ns - a.timetable.offset_ns) % t + t) % t;
  EXPECT_TRUE(d == a.timetable.window_ns || t - d == b.timetable.window_ns) << d;
  EXPECT_DOUBLE_EQ(plan.score.cushion_ns, 0.0);
}

TEST(Jitter, NearlyEqualPeriodsShareTheLongerOne) {
  // The same model measured with a little noise: 250 ms and 251 ms, 100 ms windows. The first
  // is gated at 250 ms; the second cannot run every 250 ms (its period is longer) and 251 ms
  // never interleaves with 250 ms (gcd 1 ms). Re-packed longest first, both share 251 ms.
  OnlinePlanner online(testing::Links(1));
  const Job a = MakeJob(1, 0, 250, 100, {0});
  const Job b = MakeJob(2, 0, 251, 100, {0});
  online.AddJob(a);
  const AddResult r = online.AddJob(b);
  const Plan plan = online.Snapshot();
  EXPECT_FEASIBLE((Problem{testing::Links(1), {a, b}}), plan);
  EXPECT_FALSE(r.job.best_effort);
  EXPECT_FALSE(Entry(plan, 1).best_effort);
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, 251 * kMs);
  EXPECT_EQ(Entry(plan, 2).timetable.period_ns, 251 * kMs);
  EXPECT_EQ(r.changed, std::vector<JobId>{1});
}

TEST(Jitter, JitterOutsideZeroToThePeriodIsRejected) {
  Problem p{testing::Links(1), {testing::MakeJob(1, 0, 100, 40, {0})}};
  p.jobs[0].profile.jitter_ns = -1;
  EXPECT_EQ(Validate(p).size(), 1u);
  p.jobs[0].profile.jitter_ns = 101 * testing::kMs;
  EXPECT_EQ(Validate(p).size(), 1u);
  p.jobs[0].profile.jitter_ns = 3 * testing::kMs;
  EXPECT_TRUE(Validate(p).empty());
}

TEST(Jitter, TheHeadroomIsAWholePercentSoHarmonicPeriodsStayHarmonic) {
  // 123 ms and 246 ms with σ = 1.0 and 2.0 ms: headroom rounded up to 1 % of each, 124.23 ms
  // and 248.46 ms, still 1 : 2, so they interleave (their windows fit into 124.23 ms).
  Problem p{testing::Links(1),
            {testing::MakeJob(1, 0, 123, 23, {0}), testing::MakeJob(2, 0, 246, 46, {0})}};
  p.jobs[0].profile.jitter_ns = 1'000'000;
  p.jobs[1].profile.jitter_ns = 2'000'000;
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(testing::Entry(plan, 1).timetable.period_ns, 124'230'000);
  EXPECT_EQ(testing::Entry(plan, 2).timetable.period_ns, 248'460'000);
  EXPECT_FALSE(testing::Entry(plan, 2).best_effort);
}

TEST(Jitter, PeriodsAreRoundedToAGridThatNeverCostsMoreThanOnePercent) {
  using testing::kMs;
  EXPECT_EQ(RoundUpPeriod(250 * kMs, kMs), 250 * kMs);      // already on the grid
  EXPECT_EQ(RoundUpPeriod(250 * kMs + 1, kMs), 251 * kMs);  // 1 ms grid from 100 ms up
  EXPECT_EQ(RoundUpPeriod(14'720'000, kMs), 14'800'000);    // 100 µs grid for 10–100 ms
  EXPECT_EQ(RoundUpPeriod(1'234'567, kMs), 1'240'000);      // 10 µs grid for 1–10 ms
  EXPECT_EQ(RoundUpPeriod(123'456'789, 0), 123'456'789);    // no grid
}

TEST(Jitter, AJobAloneOnItsLinksIsNotGatedAndPaysNoHeadroom) {
  Job a = testing::MakeJob(1, 0, 100, 40, {0});
  a.profile.jitter_ns = 2 * testing::kMs;
  OnlinePlanner online(testing::Links(2));
  online.AddJob(a);
  const JobPlan alone = testing::Entry(online.Snapshot(), 1);
  EXPECT_FALSE(alone.best_effort);
  EXPECT_EQ(alone.timetable.window_ns, alone.timetable.period_ns);  // always open
  EXPECT_EQ(alone.timetable.max_wait_ns, 0);
  EXPECT_DOUBLE_EQ(alone.predicted_slowdown, 0.0);
  // A newcomer on its link is placed around its planned slot, and from then on it is gated.
  const Job b = testing::MakeJob(2, 0, 100, 30, {0});
  online.AddJob(b);
  const Plan plan = online.Snapshot();
  EXPECT_FEASIBLE((Problem{testing::Links(2), {a, b}}), plan);
  EXPECT_EQ(testing::Entry(plan, 1).timetable.window_ns, 40 * testing::kMs);
  EXPECT_EQ(testing::Entry(plan, 1).timetable.period_ns, alone.timetable.period_ns);
  EXPECT_EQ(testing::Entry(plan, 1).timetable.offset_ns, alone.timetable.offset_ns);
}

// Two jobs whose 10 ms phases every 100 ms collide a tenth of the time (each would lose some
// 1 % of its period to sharing) but whose jitter asks for 4 % headroom: taking turns would cost
// both more than it saves. The second is not gated, so the first has no one to take turns with
// and runs ungated too. With phases of 40 ms and 1 % headroom, taking turns pays.
TEST(Jitter, JobsWhoseCollisionsCostLessThanTheirHeadroomAreNotGated) {
  for (const auto& [comm_ms, sigma_ms, gated] :
       {std::tuple<Nanos, Nanos, bool>{10, 4, false}, {40, 1, true}}) {
    const Job a = WithJitter(MakeJob(1, 0, 100, comm_ms, {0}), sigma_ms);
    const Job b = WithJitter(MakeJob(2, 0, 100, comm_ms, {0}), sigma_ms);
    OnlinePlanner online(testing::Links(1));
    online.AddJob(a);
    // What the extender would be told for the second job is what adding it does.
    const std::vector<std::vector<NodeId>> here{{}};
    const auto predicted = WhatIf(online, b, here);
    online.AddJob(b);
    const Plan plan = online.Snapshot();
    EXPECT_FEASIBLE((Problem{testing::Links(1), {a, b}}), plan);
    EXPECT_EQ(predicted[0].gated, gated) << comm_ms << " ms phases";
    for (const JobId id : {1, 2}) {
      const Timetable& t = Entry(plan, id).timetable;
      EXPECT_EQ(t.window_ns < t.period_ns, gated) << comm_ms << " ms phases, job " << id;
    }
  }
}

TEST(Jitter, JobsThatFitSideBySideOnTheirLinksAreNotGated) {
  // 25 % and 40 % of the link: whatever their phases, they fit side by side, so neither has
  // anybody to take turns with and a gate would only cost them headroom and waits.
  Job a = testing::MakeJob(1, 1, 100, 30, {0}, 0.25);
  Job b = testing::MakeJob(2, 0, 100, 20, {0}, 0.4);
  for (Job* j : {&a, &b}) j->profile.jitter_ns = testing::kMs;
  OnlinePlanner online(testing::Links(1));
  online.AddJob(a);
  online.AddJob(b);
  Plan plan = online.Snapshot();
  EXPECT_FEASIBLE((Problem{testing::Links(1), {a, b}}), plan);
  for (const JobId id : {1, 2}) {
    const JobPlan& e = testing::Entry(plan, id);
    EXPECT_FALSE(e.best_effort) << "job " << id;
    EXPECT_EQ(e.timetable.window_ns, e.timetable.period_ns) << "job " << id;  // always open
    EXPECT_DOUBLE_EQ(e.predicted_slowdown, 0.0) << "job " << id;
  }
  // A third job of 40 %: the three no longer fit together in every arrangement, so all three
  // take turns where they would overflow the link.
  Job c = testing::MakeJob(3, 0, 100, 20, {0}, 0.4);
  c.profile.jitter_ns = testing::kMs;
  online.AddJob(c);
  plan = online.Snapshot();
  EXPECT_FEASIBLE((Problem{testing::Links(1), {a, b, c}}), plan);
  for (const JobId id : {1, 2, 3}) {
    const JobPlan& e = testing::Entry(plan, id);
    EXPECT_FALSE(e.best_effort) << "job " << id;
    EXPECT_LT(e.timetable.window_ns, e.timetable.period_ns) << "job " << id;
  }
}

// The load sweep's case (docs/decisions/0009): a normal-priority job alone on the link, then a
// high-priority one of an unrelated period. The lower becomes best-effort and drifts; the high
// job keeps its window (it is not "alone": the drifting job would slow it), and the lower one
// yields to that window. Unless the lower job could not fit around it: on the wire 80 % of its
// period, it would spend most of its time waiting, so the high job goes ungated as before.
TEST(Jitter, ATopJobKeepsItsWindowAgainstALowerJobDriftingOnItsLink) {
  struct Case {
    Nanos lower_comm_ms;
    Nanos high_comm_ms;
    bool gated;
  };
  for (const Case c : {Case{36, 80, true}, Case{134, 150, false}}) {
    OnlinePlanner online(testing::Links(1));
    const Job lower = testing::MakeJob(2, 1, 168, c.lower_comm_ms, {0});
    const Job high = testing::MakeJob(1, 3, 280, c.high_comm_ms, {0});
    online.AddJob(lower);
    online.AddJob(high);
    const Plan plan = online.Snapshot();
    EXPECT_FEASIBLE((Problem{testing::Links(1), {lower, high}}), plan);
    const JobPlan& l = testing::Entry(plan, 2);
    ASSERT_TRUE(l.best_effort) << c.lower_comm_ms;
    ASSERT_EQ(l.timetable.window_ns, l.timetable.period_ns) << "drifting";
    const JobPlan& h = testing::Entry(plan, 1);
    EXPECT_FALSE(h.best_effort);
    const auto yields = RankedYields(testing::Links(1), {lower, high}, plan, PlannerOptions{});
    const auto lower_at = static_cast<std::size_t>(&l - plan.jobs.data());
    if (c.gated) {
      EXPECT_EQ(h.timetable.window_ns, c.high_comm_ms * kMs);
      ASSERT_NE(yields[lower_at].yields, nullptr);
      ASSERT_EQ(yields[lower_at].yields->count, 1u);
      EXPECT_EQ(yields[lower_at].yields->windows[0].period_ns, h.timetable.period_ns);
    } else {
      EXPECT_EQ(h.timetable.window_ns, h.timetable.period_ns);  // always open
      EXPECT_EQ(yields[lower_at].yields, nullptr);
    }
  }
}

TEST(Jitter, TheHeadroomIsNotAStretchTheNoStretchAblationForbids) {
  Problem p{testing::Links(1),
            {testing::MakeJob(1, 0, 100, 30, {0}), testing::MakeJob(2, 0, 100, 30, {0})}};
  for (Job& j : p.jobs) j.profile.jitter_ns = 2 * testing::kMs;
  PlannerOptions o;
  o.max_stretch = 1.0;
  const Plan plan = planner::MakePlan(p, o);
  EXPECT_FEASIBLE(p, plan);
  EXPECT_EQ(testing::Entry(plan, 1).timetable.period_ns, 102 * testing::kMs);
  EXPECT_EQ(testing::Entry(plan, 2).timetable.period_ns, 102 * testing::kMs);
  // Planned again as running jobs: they stay where they are.
  const Plan again = planner::MakePlan(p, o, &plan);
  EXPECT_EQ(testing::Entry(again, 1).timetable.offset_ns,
            testing::Entry(plan, 1).timetable.offset_ns);
  EXPECT_EQ(testing::Entry(again, 2).timetable.offset_ns,
            testing::Entry(plan, 2).timetable.offset_ns);
}

TEST(BestEffort, AWindowThatCannotBeAimedIsNotHeld) {
  // 60 + 30 ms of windows every 100 ms leave 10 ms; the third job (40 ms every 137 ms) fits at
  // no period. Its period has nothing in common with 100 ms (gcd 1 ms): the other windows sweep
  // across any window it would get, so it drifts ungated instead of waiting for one.
  const Problem p{testing::Links(1),
                  {testing::MakeJob(1, 2, 100, 60, {0}), testing::MakeJob(2, 1, 100, 30, {0}),
                   testing::MakeJob(3, 0, 137, 40, {0})}};
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  const JobPlan& low = testing::Entry(plan, 3);
  EXPECT_TRUE(low.best_effort);
  EXPECT_EQ(low.timetable.window_ns, low.timetable.period_ns);
  EXPECT_EQ(low.timetable.period_ns, 137 * testing::kMs);
  EXPECT_GT(plan.links[0].contention, 0.0);  // predicted as a random source
}

// A best-effort job is never held to an aimed window, even where a gap would take one. Two jobs
// of 53 ms every 100 ms (σ = 5 ms: gated at 105 ms), one per link, either back to back or 10 ms
// apart; a third, lower-priority job crosses both links with 20 ms phases and fits nowhere.
// Either way it runs ungated at 100 ms, its phases drifting (docs/decisions/0010: an aimed
// window paid its headroom and gate waits for overlap a drifting phase avoided as well).
TEST(BestEffort, DriftsEvenWhereAGapWouldTakeAnAimedWindow) {
  for (const Nanos second_ms : {53, 63}) {
    OnlinePlanner planner(testing::Links(2));
    Job a = WithJitter(MakeJob(1, 1, 100, 53, {0}), 5);
    a.next_phase_ns = 0;
    Job b = WithJitter(MakeJob(2, 1, 100, 53, {1}), 5);
    b.next_phase_ns = second_ms * kMs;
    planner.AddJob(a);
    planner.AddJob(b);
    const AddResult r = planner.AddJob(WithJitter(MakeJob(3, 0, 100, 20, {0, 1}), 5));
    EXPECT_TRUE(r.job.best_effort) << second_ms;
    const Plan plan = planner.Snapshot();
    EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), plan);
    EXPECT_EQ(Entry(plan, 2).timetable.offset_ns, second_ms * kMs);
    const JobPlan& c = Entry(plan, 3);
    EXPECT_EQ(c.timetable.window_ns, c.timetable.period_ns) << second_ms;  // ungated
    EXPECT_EQ(c.timetable.period_ns, 100 * kMs) << second_ms;
  }
}

// Two jobs whose phases take about half their period: 48 ms every 100 ms, σ = 2 ms, so each
// is gated at 102 ms (2 % headroom) and keeps 6 ms of cushion after its window. 2 · (48 + 6)
// = 108 ms overflow 102 ms: the second fits neither at its own period nor at a harmonic of the
// first's. Stretching both to 102 · 1.06 ≈ 108 ms costs 6 % each, far less than colliding on
// every iteration: they take turns at one period.
TEST(SharedStretch, TwoHalfDutyJobsTakeTurnsAtAPeriodStretchedForTheirCushions) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(WithJitter(MakeJob(1, 0, 100, 48, {0}), 2));
  const AddResult r = planner.AddJob(WithJitter(MakeJob(2, 0, 100, 48, {0}), 2));
  EXPECT_FALSE(r.job.best_effort);
  EXPECT_EQ(r.changed, std::vector<JobId>{1});
  const Plan plan = planner.Snapshot();
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), plan);
  const Nanos t = Entry(plan, 1).timetable.period_ns;
  EXPECT_EQ(Entry(plan, 2).timetable.period_ns, t);
  EXPECT_GE(t, 108 * kMs);
  EXPECT_LE(t, 109 * kMs);  // the least whole-percent stretch, no more
  EXPECT_GE(Entry(plan, 1).timetable.late_slack_ns, 6 * kMs);
  EXPECT_GE(Entry(plan, 2).timetable.late_slack_ns, 6 * kMs);
  planner.RemoveJob(2);  // alone again, the first shrinks back to its own period
  EXPECT_EQ(Entry(planner.Snapshot(), 1).timetable.period_ns, 102 * kMs);
}

// Stretched that far, the jobs wait at their gates every iteration: their phases start at the
// window openings whatever the jitter, so each keeps 1σ after its window instead of 3σ. Two
// 60 ms phases every 100 ms, σ = 3 ms (3 % headroom: 103 ms): with 9 ms cushions they would
// need 138 ms; with 3 ms, 126 ms, 27 ms above their natural period, more than 3σ.
TEST(SharedStretch, JobsStretchedPastTheirJitterKeepASmallerCushion) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(WithJitter(MakeJob(1, 0, 100, 60, {0}), 3));
  const AddResult r = planner.AddJob(WithJitter(MakeJob(2, 0, 100, 60, {0}), 3));
  EXPECT_FALSE(r.job.best_effort);
  const Plan plan = planner.Snapshot();
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), plan);
  EXPECT_EQ(Entry(plan, 1).timetable.period_ns, Entry(plan, 2).timetable.period_ns);
  EXPECT_GE(Entry(plan, 1).timetable.period_ns, 126 * kMs);
  EXPECT_LT(Entry(plan, 1).timetable.period_ns, 128 * kMs);
  for (const JobId id : {1u, 2u}) EXPECT_GE(Entry(plan, id).timetable.late_slack_ns, 3 * kMs) << id;
  // Unstretched, a job keeps its 3σ: two 30 ms phases fit at 103 ms with 9 ms after each.
  OnlinePlanner calm(testing::Links(1));
  calm.AddJob(WithJitter(MakeJob(1, 0, 100, 30, {0}), 3));
  calm.AddJob(WithJitter(MakeJob(2, 0, 100, 30, {0}), 3));
  for (const JobId id : {1u, 2u}) {
    EXPECT_EQ(Entry(calm.Snapshot(), id).timetable.period_ns, 103 * kMs) << id;
    EXPECT_GE(Entry(calm.Snapshot(), id).timetable.late_slack_ns, 9 * kMs) << id;
  }
}

// Not when it costs more than it gains. A 30 ms phase beside a 60 ms one, both every 100 ms
// with σ = 8 ms (24 ms cushions, 8 % headroom: gated at 108 ms): together they would need 128 %
// of that, a 38 % stretch each (0.69 in stage-2 units), while running the newcomer ungated
// costs about 0.35, though the stretch would serve more load. A 5 ms phase beside an 80 ms one
// (σ = 5 ms): a 10 % stretch of the 80 ms one would serve less load (stage 1) and cost more
// than the small job's contention (stage 2). Either way the newcomer stays best-effort and the
// first job keeps its period.
TEST(SharedStretch, NotWhenTheStretchCostsMoreThanItGains) {
  struct Case {
    Nanos first_ms, newcomer_ms, sigma_ms, gated_ms;
  };
  for (const Case c : {Case{60, 30, 8, 108}, Case{80, 5, 5, 105}}) {
    OnlinePlanner planner(testing::Links(1));
    planner.AddJob(WithJitter(MakeJob(1, 0, 100, c.first_ms, {0}), c.sigma_ms));
    const AddResult r =
        planner.AddJob(WithJitter(MakeJob(2, 0, 100, c.newcomer_ms, {0}), c.sigma_ms));
    EXPECT_TRUE(r.job.best_effort) << c.newcomer_ms;
    EXPECT_TRUE(r.changed.empty()) << c.newcomer_ms;
    EXPECT_EQ(Entry(planner.Snapshot(), 1).timetable.period_ns, c.gated_ms * kMs) << c.newcomer_ms;
  }
}

// A newcomer that outranks its neighbour is not stretched to make room for it (stage 1 serves
// the higher class first): it takes its own period and the lower-priority job gives way.
TEST(SharedStretch, AHigherPriorityNewcomerIsNotStretchedForALowerOne) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(WithJitter(MakeJob(1, 0, 100, 48, {0}), 2));
  const AddResult r = planner.AddJob(WithJitter(MakeJob(2, 1, 100, 48, {0}), 2));
  EXPECT_FALSE(r.job.best_effort);
  EXPECT_EQ(r.job.timetable.period_ns, 102 * kMs);
  EXPECT_TRUE(Entry(planner.Snapshot(), 1).best_effort);
}

// Whether a job stretches to a harmonic of its neighbour's period or runs ungated must not
// depend on how many links the two share: the neighbour's one transfer is slowed once. A 55 ms
// phase every 100 ms and a 20 ms phase every 70 ms (gcd 10 ms: no room at 70 ms); the harmonic
// 100 ms would stretch the newcomer by 43 %, more than the ~31 % that running ungated costs.
TEST(StretchOrUngated, ANeighbourMetOnSeveralLinksCountsOnce) {
  for (const int shared : {1, 2}) {
    const std::vector<LinkId> on = shared == 1 ? std::vector<LinkId>{0} : std::vector<LinkId>{0, 1};
    OnlinePlanner planner(testing::Links(2));
    Job a = MakeJob(1, 0, 100, 55, {});
    a.extra_links = on;
    Job b = MakeJob(2, 0, 70, 20, {});
    b.extra_links = on;
    planner.AddJob(a);
    const AddResult r = planner.AddJob(b);
    EXPECT_TRUE(r.job.best_effort) << shared << " shared link(s)";
    EXPECT_EQ(r.job.timetable.period_ns, 70 * kMs) << shared << " shared link(s)";
  }
}

}  // namespace
}  // namespace metronome::planner
