// Re-planning with the current plan as input, and the stateful online planner.
#include <gtest/gtest.h>

#include <random>

#include "metronome/planner/planner.hpp"
#include "metronome/planner/ranked_yields.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::Entry;
using testing::kMs;
using testing::MakeJob;

TEST(Replan, AfterAJobLeavesTheOthersStayStillWhenNothingIsGained) {
  Problem p{
      testing::Links(1),
      {MakeJob(1, 0, 100, 20, {0}), MakeJob(2, 0, 100, 20, {0}), MakeJob(3, 0, 100, 20, {0})}};
  const Plan before = MakePlan(p);
  EXPECT_FEASIBLE(p, before);
  p.jobs.erase(p.jobs.begin() + 1);
  const Plan after = MakePlan(p, {}, &before);
  EXPECT_FEASIBLE(p, after);
  for (const JobId id : {1u, 3u}) {
    EXPECT_EQ(Entry(after, id).timetable.offset_ns, Entry(before, id).timetable.offset_ns)
        << "job " << id;
    EXPECT_EQ(Entry(after, id).timetable.period_ns, Entry(before, id).timetable.period_ns)
        << "job " << id;
  }
  // The freed gap is now cushion, without moving anybody.
  EXPECT_GT(Entry(after, 1).timetable.late_slack_ns + Entry(after, 3).timetable.late_slack_ns,
            Entry(before, 1).timetable.late_slack_ns + Entry(before, 3).timetable.late_slack_ns);
}

TEST(Replan, WithNoChangeTheSamePlanComesBack) {
  const Problem p{
      testing::Links(2),
      {MakeJob(1, 1, 100, 30, {0, 1}), MakeJob(2, 0, 200, 50, {0}), MakeJob(3, 0, 50, 10, {1})}};
  const Plan first = MakePlan(p);
  const Plan second = MakePlan(p, {}, &first);
  EXPECT_FEASIBLE(p, second);
  for (const JobPlan& e : first.jobs) {
    EXPECT_EQ(Entry(second, e.id).timetable.offset_ns, e.timetable.offset_ns);
    EXPECT_EQ(Entry(second, e.id).timetable.period_ns, e.timetable.period_ns);
  }
}

TEST(Replan, RunningJobsWithUnrelatedPeriodsStayStill) {
  // 100, 120 and 150 ms interleave by the gcd rule; re-planning with nothing changed and after
  // one leaves moves nobody.
  Problem p{testing::Links(1),
            {MakeJob(1, 0, 100, 8, {0}), MakeJob(2, 0, 120, 8, {0}), MakeJob(3, 0, 150, 10, {0})}};
  const Plan first = MakePlan(p);
  EXPECT_FEASIBLE(p, first);
  const Plan again = MakePlan(p, {}, &first);
  p.jobs.pop_back();
  const Plan after = MakePlan(p, {}, &first);
  EXPECT_FEASIBLE(p, after);
  for (const JobId id : {1u, 2u}) {
    EXPECT_FALSE(Entry(first, id).best_effort);
    EXPECT_EQ(Entry(again, id).timetable.offset_ns, Entry(first, id).timetable.offset_ns)
        << "job " << id;
    EXPECT_EQ(Entry(after, id).timetable.offset_ns, Entry(first, id).timetable.offset_ns)
        << "job " << id;
    EXPECT_EQ(Entry(after, id).timetable.period_ns, Entry(first, id).timetable.period_ns)
        << "job " << id;
  }
  EXPECT_EQ(Entry(again, 3).timetable.offset_ns, Entry(first, 3).timetable.offset_ns);
}

TEST(Replan, AHigherPriorityNewcomerDisplacesARunningJob) {
  Problem p{testing::Links(1), {MakeJob(1, 0, 100, 60, {0})}};
  const Plan before = MakePlan(p);
  p.jobs.push_back(MakeJob(2, 5, 100, 60, {0}));
  const Plan after = MakePlan(p, {}, &before);
  EXPECT_FEASIBLE(p, after);
  EXPECT_FALSE(Entry(after, 2).best_effort);
  EXPECT_TRUE(Entry(after, 1).best_effort);
}

TEST(Replan, AHigherPriorityNewcomerLeavesTheLowPriorityJobGatedAtTheHarmonicHalfPeriod) {
  // The CPU testbed demo on its bottleneck: jobs 1 (high) and 2 (normal) put 170 ms on the wire
  // every 485 ms, job 3 (low) 23 ms every 228 ms; 1 ms jitter, so 3 ms reserved after each
  // window and periods of 489.85 ms (1 % headroom). 2 × (170 + 3) + 2 × (23 + 3) = 398 ms of
  // 489.85: job 3 fits gated at half of it, 244.925 ms (a 7 % stretch, far cheaper than its
  // ungated bursts across the others' windows, counted twice for the higher priorities). Jobs 2 and
  // 3 run; job 1 joins and the service re-plans with the current plan. Job 1 is packed against job
  // 2's window, and two windows back to back cover the whole 242.5 ms circle: before the second
  // admission after stage 3 the re-plan left job 3 best-effort, drifting, although adding it again
  // gated it.
  auto jittered = [](Job j) {
    j.profile.jitter_ns = 1 * kMs;
    return j;
  };
  Problem p{testing::Links(1),
            {jittered(MakeJob(2, 1, 485, 170, {0})), jittered(MakeJob(3, 0, 228, 23, {0}))}};
  const Plan before = MakePlan(p);
  EXPECT_FEASIBLE(p, before);
  ASSERT_FALSE(Entry(before, 2).best_effort);
  ASSERT_FALSE(Entry(before, 3).best_effort);
  p.jobs.push_back(jittered(MakeJob(1, 2, 485, 170, {0})));
  const Plan after = MakePlan(p, {}, &before);
  EXPECT_FEASIBLE(p, after);
  const JobPlan& high = Entry(after, 1);
  const JobPlan& low = Entry(after, 3);
  EXPECT_FALSE(high.best_effort);
  EXPECT_FALSE(Entry(after, 2).best_effort);
  EXPECT_EQ(Entry(after, 2).timetable.period_ns, high.timetable.period_ns);
  ASSERT_FALSE(low.best_effort);
  EXPECT_EQ(low.timetable.period_ns * 2, high.timetable.period_ns);  // the harmonic half period
  EXPECT_LT(low.timetable.window_ns, low.timetable.period_ns);
  // Every window keeps at least its reserved cushion, and the high-priority one more.
  for (const JobPlan& e : after.jobs) {
    EXPECT_GE(e.timetable.late_slack_ns, 3 * kMs) << "job " << e.id;
  }
  EXPECT_GT(high.timetable.late_slack_ns, 3 * kMs);
  EXPECT_EQ(after.links[0].contention, 0.0);
}

TEST(OnlinePlanner, AddJobTakesAFreePlaceWithoutMovingOthers) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(MakeJob(1, 0, 100, 30, {0}));
  planner.AddJob(MakeJob(2, 0, 100, 30, {0}));
  const Plan before = planner.Snapshot();  // 30 + 30 with the 40 ms of slack spread: 20 + 20
  const AddResult r = planner.AddJob(MakeJob(3, 0, 100, 20, {0}));
  EXPECT_TRUE(r.changed.empty());
  EXPECT_FALSE(r.job.best_effort);
  const Plan after = planner.Snapshot();
  const Problem p{planner.GetTopology(), planner.Jobs()};
  EXPECT_FEASIBLE(p, after);
  EXPECT_EQ(Entry(after, 1).timetable.offset_ns, Entry(before, 1).timetable.offset_ns);
  EXPECT_EQ(Entry(after, 2).timetable.offset_ns, Entry(before, 2).timetable.offset_ns);
  EXPECT_EQ(Entry(after, 3).timetable.late_slack_ns, r.job.timetable.late_slack_ns);
}

TEST(OnlinePlanner, AddJobRepacksItsNeighboursWhenTheSlackIsSpreadTooThin) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(MakeJob(1, 0, 100, 30, {0}));
  planner.AddJob(MakeJob(2, 0, 100, 30, {0}));  // gaps of 20 and 20: no room for 30 ...
  const AddResult r = planner.AddJob(MakeJob(3, 0, 100, 30, {0}));
  EXPECT_FALSE(r.job.best_effort);  // ... until the neighbours are packed again
  EXPECT_FALSE(r.changed.empty());
  const Problem p{planner.GetTopology(), planner.Jobs()};
  const Plan after = planner.Snapshot();
  EXPECT_FEASIBLE(p, after);
  for (const JobPlan& e : after.jobs) EXPECT_FALSE(e.best_effort);
}

// The same, among many small neighbours: an arrival re-packs at most kMaxLocalMoves (32) of
// them; past that the newcomer waits best-effort for the offline search, and no one moves.
TEST(OnlinePlanner, AddJobRepacksAtMost32Neighbours) {
  const auto add_among = [](int small) {
    OnlinePlanner planner(testing::Links(1));
    planner.AddJob(MakeJob(1, 0, 100, 30, {0}));
    planner.AddJob(MakeJob(2, 0, 100, 30, {0}));
    for (int k = 0; k < small; ++k) {
      planner.AddJob(MakeJob(static_cast<JobId>(10) + static_cast<JobId>(k), 0, 1000, 1, {0}));
    }
    return planner.AddJob(MakeJob(3, 0, 100, 30, {0}));
  };
  const AddResult few = add_among(30);  // 32 neighbours
  EXPECT_FALSE(few.job.best_effort);
  EXPECT_FALSE(few.changed.empty());
  const AddResult many = add_among(31);  // 33
  EXPECT_TRUE(many.job.best_effort);
  EXPECT_TRUE(many.changed.empty());
}

TEST(OnlinePlanner, AddJobThatOutranksMakesRoomByMovingLowerPriorities) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(MakeJob(1, 0, 100, 30, {0}));
  planner.AddJob(MakeJob(2, 0, 100, 30, {0}));
  planner.AddJob(MakeJob(3, 0, 100, 30, {0}));
  const AddResult r = planner.AddJob(MakeJob(4, 9, 100, 40, {0}));
  EXPECT_FALSE(r.job.best_effort);
  const Plan after = planner.Snapshot();
  const Problem p{planner.GetTopology(), planner.Jobs()};
  EXPECT_FEASIBLE(p, after);
  int best_effort = 0;
  for (const JobPlan& e : after.jobs) best_effort += e.best_effort ? 1 : 0;
  EXPECT_EQ(best_effort, 1);  // one of the three low-priority jobs gives way
}

// A newcomer that outranks the jobs on its link takes its pick first: it gets the period it
// would get alone there, and the lower-priority jobs are placed again around it, each gated
// (once stage 3 has spread the cushions, those left best-effort get a second try). add_job,
// making room for it the same way but without that second try, leaves one of them best-effort.
// A job on another link does not move.
TEST(OnlinePlanner, AddJobFirstGivesTheNewcomerFirstPickOnItsLinksOnly) {
  const auto start = [] {
    OnlinePlanner p(testing::Links(2));
    p.AddJob(MakeJob(1, 0, 100, 30, {0}));
    p.AddJob(MakeJob(2, 0, 150, 30, {0}));
    p.AddJob(MakeJob(4, 0, 120, 30, {1}));
    return p;
  };
  const Job newcomer = MakeJob(3, 5, 100, 30, {0});
  OnlinePlanner alone(testing::Links(2));
  const Nanos own_period = alone.AddJob(newcomer).job.timetable.period_ns;
  OnlinePlanner around = start();
  (void)around.AddJob(newcomer);
  const Plan fitted = around.Snapshot();
  EXPECT_TRUE(Entry(fitted, 1).best_effort || Entry(fitted, 2).best_effort);

  OnlinePlanner planner = start();
  const Plan before = planner.Snapshot();
  const AddResult r = planner.AddJobFirst(newcomer);
  const Plan after = planner.Snapshot();
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), after);
  EXPECT_FALSE(r.job.best_effort);
  EXPECT_EQ(Entry(after, 3).timetable.period_ns, own_period);
  // Jobs 1 and 2 fit around it: gated, or ungated where waiting for its windows costs them
  // less than a stretch would (stage 2), each then yielding to them.
  const auto yields = RankedYields(planner.GetTopology(), planner.Jobs(), after, PlannerOptions{});
  for (std::size_t i = 0; i < after.jobs.size(); ++i) {
    const JobId id = after.jobs[i].id;
    if ((id != 1 && id != 2) || !after.jobs[i].best_effort) continue;
    ASSERT_NE(yields[i].yields, nullptr) << id;
    EXPECT_EQ(yields[i].yields->count, 1u) << id;
    EXPECT_EQ(yields[i].yields->windows[0].period_ns, r.job.timetable.period_ns) << id;
  }
  EXPECT_EQ(Entry(after, 4).timetable.offset_ns, Entry(before, 4).timetable.offset_ns);
  EXPECT_EQ(Entry(after, 4).timetable.period_ns, Entry(before, 4).timetable.period_ns);
}

// A job that runs ungated before it is planned has a phase of its own: its first window opens
// where its next phase comes (when that place is free), so that the phase does not wait for it.
// Without the hint the window goes wherever packing puts it (here 0), up to a period away.
TEST(OnlinePlanner, ANewJobsFirstWindowOpensWhenItsNextPhaseComes) {
  Job first = MakeJob(1, 0, 100, 30, {0});
  first.next_phase_ns = 12'300 * kMs + 37 * kMs;  // any instant in the plan's frame
  OnlinePlanner planner(testing::Links(1));
  EXPECT_EQ(planner.AddJob(first).job.timetable.offset_ns, 37 * kMs);
  OnlinePlanner unhinted(testing::Links(1));
  EXPECT_EQ(unhinted.AddJob(MakeJob(1, 0, 100, 30, {0})).job.timetable.offset_ns, 0);

  // Where the phase would land in another job's window, the first free place after it.
  Job second = MakeJob(2, 0, 100, 30, {0});
  second.next_phase_ns = 40 * kMs;  // inside job 1's window [37, 67)
  const AddResult r = planner.AddJob(second);
  EXPECT_FALSE(r.job.best_effort);
  EXPECT_GE(r.job.timetable.offset_ns, 67 * kMs);
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), planner.Snapshot());
  // The hint is for that one addition: the planner does not keep it.
  for (const Job& j : planner.Jobs()) EXPECT_EQ(j.next_phase_ns, kUnknownPhase) << j.id;
}

// The CPU testbed demo: the low-priority job runs (alone, so ungated), then the high-priority
// one joins and is placed first; its window opens at its next phase, whatever the low one's.
TEST(OnlinePlanner, AHigherPriorityNewcomerPlacedFirstGetsItsOwnPhase) {
  auto jittered = [](Job j, Nanos next_phase_ms) {
    j.profile.jitter_ns = 1 * kMs;
    j.next_phase_ns = next_phase_ms * kMs;
    return j;
  };
  OnlinePlanner planner(testing::Links(1));
  (void)planner.AddJob(jittered(MakeJob(3, 0, 228, 23, {0}), 5));
  const AddResult high = planner.AddJobFirst(jittered(MakeJob(1, 2, 485, 170, {0}), 1'000'404));
  EXPECT_FALSE(high.job.best_effort);
  EXPECT_EQ(high.job.timetable.offset_ns, (1'000'404 * kMs) % high.job.timetable.period_ns);
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), planner.Snapshot());
}

// Link load profiles are kept up to date job by job (place, unplace, slide) rather than rebuilt;
// after a long random sequence of additions and removals on stacking links (rectangles lower
// than the link), every cushion and slowdown must equal that of the same plan loaded afresh.
TEST(OnlinePlanner, IncrementallyKeptLinkProfilesAgreeWithFreshOnes) {
  std::mt19937_64 rng(7);
  OnlinePlanner planner(testing::Links(3));
  const Nanos periods[] = {100, 150, 200, 300};
  JobId next = 1;
  std::vector<JobId> live;
  for (int step = 0; step < 200; ++step) {
    if (live.size() > 4 && rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      planner.RemoveJob(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    const auto link = static_cast<LinkId>(rng() % 3);
    const Job j = MakeJob(next, static_cast<int>(rng() % 3), periods[rng() % 4],
                          static_cast<Nanos>(5 + rng() % 20), {link},
                          0.3 + 0.1 * static_cast<double>(rng() % 5));
    if (rng() % 2 == 0) {
      planner.AddJob(j);
    } else {
      planner.AddJobFirst(j);
    }
    live.push_back(next++);
  }
  const Plan kept = planner.Snapshot();
  OnlinePlanner fresh(planner.GetTopology());
  fresh.Adopt(planner.Jobs(), kept);
  const Plan again = fresh.Snapshot();
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), kept);
  ASSERT_EQ(again.jobs.size(), kept.jobs.size());
  for (const JobPlan& e : kept.jobs) {
    EXPECT_EQ(Entry(again, e.id).timetable.late_slack_ns, e.timetable.late_slack_ns) << e.id;
    EXPECT_EQ(Entry(again, e.id).predicted_slowdown, e.predicted_slowdown) << e.id;
  }
}

// A higher-priority newcomer on a link full of lower-priority windows takes the place of the
// lowest-ranked of them, but takes off at most kMaxLocalMoves (32) whatever their number: 38
// jobs of 8 ms every 400 ms leave no 30 ms gap; the newcomer is gated, and the 6 ranked highest
// below it (priority 1, the lowest ids: placement order) keep their windows.
TEST(OnlinePlanner, AHigherNewcomerTakesOffAtMost32LowerWindows) {
  OnlinePlanner planner(testing::Links(1));
  for (JobId id = 1; id <= 38; ++id) {
    ASSERT_FALSE(planner.AddJob(MakeJob(id, id % 2, 400, 8, {0})).job.best_effort) << id;
  }
  const Plan before = planner.Snapshot();
  const AddResult r = planner.AddJob(MakeJob(100, 2, 400, 30, {0}));
  EXPECT_FALSE(r.job.best_effort);
  const Plan after = planner.Snapshot();
  for (const JobId id : {1, 3, 5, 7, 9, 11}) {
    EXPECT_EQ(Entry(after, id).timetable.offset_ns, Entry(before, id).timetable.offset_ns) << id;
  }
  EXPECT_FEASIBLE((Problem{planner.GetTopology(), planner.Jobs()}), after);
}

TEST(OnlinePlanner, RemoveJobLetsABestEffortJobIn) {
  OnlinePlanner planner(testing::Links(1));
  planner.AddJob(MakeJob(1, 2, 100, 50, {0}));
  planner.AddJob(MakeJob(2, 1, 100, 40, {0}));
  EXPECT_TRUE(planner.AddJob(MakeJob(3, 0, 100, 30, {0})).job.best_effort);
  const Plan before = planner.Snapshot();
  planner.RemoveJob(2);
  const Plan after = planner.Snapshot();
  const Problem p{planner.GetTopology(), planner.Jobs()};
  EXPECT_FEASIBLE(p, after);
  EXPECT_FALSE(Entry(after, 3).best_effort);
  EXPECT_EQ(Entry(after, 1).timetable.offset_ns,
            Entry(before, 1).timetable.offset_ns);  // the others stay still
  EXPECT_EQ(after.jobs.size(), 2u);
}

TEST(OnlinePlanner, AdoptTakesAPlanAsItIs) {
  const Problem p{testing::Links(1), {MakeJob(1, 0, 100, 30, {0}), MakeJob(2, 0, 100, 30, {0})}};
  const Plan original = MakePlan(p);
  OnlinePlanner planner(p.topology);
  planner.Adopt(p.jobs, original);
  const Plan again = planner.Snapshot();
  for (const JobPlan& e : original.jobs) {
    EXPECT_EQ(Entry(again, e.id).timetable.offset_ns, e.timetable.offset_ns);
    EXPECT_EQ(Entry(again, e.id).timetable.late_slack_ns, e.timetable.late_slack_ns);
  }
}

}  // namespace
}  // namespace metronome::planner

namespace metronome::planner {
namespace {

TEST(Validation, InvalidJobsAreRejectedWithAClearMessage) {
  Problem p{testing::Links(1), {testing::MakeJob(1, 0, 100, 140, {0})}};  // c > P
  EXPECT_THROW((void)MakePlan(p), std::invalid_argument);
  OnlinePlanner planner(p.topology);
  try {
    planner.AddJob(testing::MakeJob(2, 0, 0, 0, {0}));  // P = 0
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("natural period"), std::string::npos);
  }
  EXPECT_TRUE(planner.Snapshot().jobs.empty());  // nothing half-added
  p.jobs[0].extra_links = {9};
  EXPECT_THROW((void)MakePlan(p), std::invalid_argument);
}

// A newcomer's neighbours (for snapping its period to theirs) come from its links' occupants,
// gated and best-effort alike: each once, in Jobs() order, never the job itself, never a job on
// other links or on none.
TEST(Online, JobsSharingLinksAreTheOccupantsOfItsLinks) {
  OnlinePlanner planner(testing::Links(3));
  (void)planner.AddJob(MakeJob(1, 2, 100, 40, {0, 1}));
  (void)planner.AddJob(MakeJob(6, 1, 100, 30, {0}));
  (void)planner.AddJob(MakeJob(2, 0, 100, 40, {0}));  // no period fits it: best-effort
  (void)planner.AddJob(MakeJob(3, 0, 100, 20, {2}));
  (void)planner.AddJob(MakeJob(4, 0, 100, 20, {}));
  (void)planner.AddJob(MakeJob(5, 0, 100, 20, {1}));
  ASSERT_TRUE(planner.Snapshot().Find(2)->best_effort);
  const auto ids = [](const std::vector<Job>& jobs) {
    std::vector<JobId> out;
    out.reserve(jobs.size());
    for (const Job& j : jobs) out.push_back(j.id);
    return out;
  };
  EXPECT_EQ(ids(planner.JobsSharingLinks(MakeJob(1, 2, 100, 40, {0, 1}))),
            (std::vector<JobId>{6, 2, 5}));
  EXPECT_EQ(ids(planner.JobsSharingLinks(MakeJob(9, 0, 100, 30, {0, 1, 2}))),
            (std::vector<JobId>{1, 6, 2, 3, 5}));
  EXPECT_TRUE(planner.JobsSharingLinks(MakeJob(9, 0, 100, 30, {})).empty());
}

}  // namespace
}  // namespace metronome::planner
