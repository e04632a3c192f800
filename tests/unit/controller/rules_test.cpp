// The controller's rules, one by one, on a job's state.
#include <gtest/gtest.h>

#include <limits>

#include "metronome/common/clock.hpp"
#include "metronome/controller/rules.hpp"

namespace metronome::controller {
namespace {

struct Fixture {
  JobState job;
  RankState rank;
  ControllerConfig controller;
  PlanningConfig planning;
  int64_t now = 1'000'000 * kMs;

  Fixture() {
    job.planned = true;
    job.has_profile = true;
    job.profile.period_ns = job.planned_profile.period_ns = 100 * kMs;
    job.profile.comm_ns = job.planned_profile.comm_ns = 30 * kMs;
    job.timetable = {3, 0, 100 * kMs, 20 * kMs, 30 * kMs, 10 * kMs, 100 * kMs};
    rank.timetable_version = 3;
  }

  proto::ProfileReport Report(std::vector<int64_t> starts, int64_t period = 100 * kMs,
                              int64_t comm = 30 * kMs) {
    proto::ProfileReport r;
    r.job_id.assign(1, 'j');
    r.period_ns = period;
    r.comm_ns = comm;
    r.confidence = 0.9;
    r.timetable_version = 3;
    r.phase_starts_ns = std::move(starts);
    return r;
  }

  // Phase starts `late` after the window openings of the last `n` periods before now.
  std::vector<int64_t> Starts(int n, int64_t late) {
    std::vector<int64_t> s;
    const int64_t open = WindowOpenAtOrBefore(job.timetable, now);
    for (int k = n - 1; k >= 0; --k) s.push_back(open - k * job.timetable.period_ns + late);
    return s;
  }

  // The job's bytes known and planned (the profile-change rule then compares compute and bytes,
  // not the measured phase), and its timetable run long enough to be judged (the overrun rule).
  void BytesKnown() {
    job.phases_seen = 100;
    job.profile.bytes_per_phase = job.planned_profile.bytes_per_phase = 1'000'000;
    job.profile.min_comm_ns = job.planned_profile.min_comm_ns = 30 * kMs;
  }

  // A report of such a job whose phases took `comm`.
  proto::ProfileReport PhaseReport(int64_t comm, int64_t period = 100 * kMs) {
    proto::ProfileReport r = Report({}, period, comm);
    r.bytes_per_phase = 1'000'000;
    return r;
  }

  ReportVerdict Apply(const proto::ProfileReport& r) {
    now += 100 * kMs;
    return ApplyReport(job, rank, r, controller, planning, now);
  }
};

TEST(Controller, SignedLatenessIsRelativeToTheNearestOpening) {
  const Timetable tt{1, 0, 100 * kMs, 20 * kMs, 30 * kMs, 10 * kMs, 100 * kMs};
  EXPECT_EQ(SignedLateness(tt, 20 * kMs), 0);
  EXPECT_EQ(SignedLateness(tt, 25 * kMs), 5 * kMs);
  EXPECT_EQ(SignedLateness(tt, 15 * kMs), -5 * kMs);
  EXPECT_EQ(SignedLateness(tt, 1'000 * kMs + 70 * kMs), 50 * kMs);
}

// The next phase of an ungated job at a steady pace: its last start plus whole periods of that
// pace, plus half the gaps' spread (arriving a little early costs less than arriving late).
// An unsteady pace predicts nothing. A gated job's next phase is its next window.
TEST(Controller, TheNextPhaseFollowsASteadyPace) {
  JobState job;
  EXPECT_EQ(PredictNextPhase(job, 0), 0);  // nothing measured
  for (int64_t s : {1'000, 1'100, 1'200, 1'300}) job.phases.push_back({s * kMs});
  EXPECT_EQ(PredictNextPhase(job, 0), 0);  // three gaps: too few to call it steady
  job.phases.push_back({1'402 * kMs});     // gaps 100, 100, 100, 102
  EXPECT_EQ(PredictNextPhase(job, 1'403 * kMs), (1'502 + 1) * kMs);
  EXPECT_EQ(PredictNextPhase(job, 1'700 * kMs), (1'702 + 1) * kMs);
  EXPECT_EQ(PredictNextPhase(job, 1'300 * kMs), (1'502 + 1) * kMs);  // after the last start
  job.phases.push_back({1'530 * kMs});  // a slow iteration (128 ms): not steady
  EXPECT_EQ(PredictNextPhase(job, 1'531 * kMs), 0);

  job.planned = true;
  job.timetable = {2, 0, 100 * kMs, 20 * kMs, 30 * kMs, 10 * kMs, 70 * kMs};
  EXPECT_EQ(PredictNextPhase(job, 1'661 * kMs), 1'720 * kMs);
}

// The shim's cumulative gate counters are kept per rank as last reported (status API).
TEST(Controller, TheShimsGateCountersAreKeptPerRank) {
  Fixture f;
  proto::ProfileReport r = f.Report(f.Starts(3, 0));
  r.gated = 7;
  r.late = 4;
  r.failed_open = 1;
  r.realigned = 2;
  EXPECT_EQ(f.Apply(r).realigned, 2u);
  EXPECT_EQ(f.rank.gated, 7u);
  EXPECT_EQ(f.rank.late, 4u);
  EXPECT_EQ(f.rank.failed_open, 1u);
  EXPECT_EQ(f.rank.realigned, 2u);
  r.realigned = 5;  // cumulative: the verdict carries what is new
  EXPECT_EQ(f.Apply(r).realigned, 3u);
}

TEST(Controller, FirstUsableProfileMakesTheJobPlannable) {
  Fixture f;
  f.job.has_profile = false;
  f.job.planned = false;
  auto low = f.Report({});
  low.confidence = 0.1;
  EXPECT_FALSE(f.Apply(low).first_profile);
  auto bad = f.Report({}, 100 * kMs, 200 * kMs);  // comm > period
  EXPECT_FALSE(f.Apply(bad).first_profile);
  EXPECT_TRUE(f.Apply(f.Report({})).first_profile);
  EXPECT_FALSE(f.Apply(f.Report({})).first_profile);
}

TEST(Controller, OnTimePhasesAreNeverLate) {
  Fixture f;
  for (int i = 0; i < 20; ++i) {
    const auto v = f.Apply(f.Report(f.Starts(3, 2 * kMs)));
    EXPECT_EQ(v.late_phases, 0u);
    EXPECT_EQ(v.decision, Decision::kNone);
  }
  EXPECT_EQ(f.job.phases_late, 0u);
  EXPECT_NEAR(f.job.lateness_ewma_ns, 2.0 * kMs, 0.05 * kMs);
}

TEST(Controller, JitterBelowTheAllowanceIsNotLatenessEvenWithoutCushion) {
  Fixture f;
  f.job.timetable.late_slack_ns = 0;
  EXPECT_EQ(f.Apply(f.Report(f.Starts(1, kMs / 2))).late_phases, 0u);  // 0.5 ms < 1 ms
  EXPECT_EQ(f.Apply(f.Report(f.Starts(1, 5 * kMs))).late_phases, 1u);
  f.rank.clock_error_ns = 0;
  auto r = f.Report(f.Starts(1, 5 * kMs));
  r.clock_error_ns = 8 * kMs;  // the rank cannot tell 5 ms from on time
  EXPECT_EQ(f.Apply(r).late_phases, 0u);
}

TEST(Controller, DuplicatePhasesFromOtherRanksAreCountedOnce) {
  Fixture f;
  const auto starts = f.Starts(4, 0);
  EXPECT_EQ(f.Apply(f.Report(starts)).new_phases, 4u);
  EXPECT_EQ(f.Apply(f.Report(starts)).new_phases, 0u);
  EXPECT_EQ(f.job.phases.size(), 4u);
}

// A sender other than the shim may list its phase starts in any order: they count as in order.
TEST(Controller, PhaseStartsOutOfOrderAreTakenInOrder) {
  Fixture f;
  auto starts = f.Starts(4, 0);
  std::swap(starts[0], starts[3]);
  std::swap(starts[1], starts[2]);
  EXPECT_EQ(f.Apply(f.Report(starts)).new_phases, 4u);
  ASSERT_EQ(f.job.phases.size(), 4u);
  for (size_t i = 1; i < 4; ++i) EXPECT_LT(f.job.phases[i - 1].start_ns, f.job.phases[i].start_ns);
  EXPECT_EQ(f.Apply(f.Report(starts)).new_phases, 0u);
}

TEST(Controller, PersistentLatenessTriggersOneReplanPerCooldown) {
  Fixture f;
  f.controller.late_reports = 3;
  std::vector<Decision> d;
  d.reserve(3);
  for (int i = 0; i < 3; ++i) d.push_back(f.Apply(f.Report(f.Starts(1, 40 * kMs))).decision);
  EXPECT_EQ(d,
            (std::vector<Decision>{Decision::kNone, Decision::kNone, Decision::kReplanLateness}));
  f.job.last_replan_ns = f.now;  // the service records the re-plan
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(f.Apply(f.Report(f.Starts(1, 40 * kMs))).decision, Decision::kNone)
        << "inside the cooldown";
  }
  EXPECT_GE(f.job.phases_late, 8u);
}

TEST(Controller, AnOnTimeReportResetsTheLateStreak) {
  Fixture f;
  f.controller.late_reports = 3;
  f.Apply(f.Report(f.Starts(1, 40 * kMs)));
  f.Apply(f.Report(f.Starts(1, 40 * kMs)));
  f.Apply(f.Report(f.Starts(1, 1 * kMs)));
  EXPECT_EQ(f.job.consecutive_late_reports, 0u);
  EXPECT_EQ(f.Apply(f.Report(f.Starts(1, 40 * kMs))).decision, Decision::kNone);
}

TEST(Controller, HeldPhasesReportedByTheShimCount) {
  Fixture f;
  auto r = f.Report({});
  r.late = 4;
  EXPECT_EQ(f.Apply(r).late_phases, 4u);
  r.late = 5;
  EXPECT_EQ(f.Apply(r).late_phases, 1u);
}

TEST(Controller, ChangedProfileTriggersReplanAfterConsecutiveReports) {
  Fixture f;
  f.controller.profile_change_reports = 2;
  EXPECT_EQ(f.Apply(f.Report({}, 105 * kMs, 31 * kMs)).decision, Decision::kNone);  // within 10 %
  EXPECT_EQ(f.Apply(f.Report({}, 150 * kMs, 30 * kMs)).decision, Decision::kNone);
  EXPECT_EQ(f.Apply(f.Report({}, 150 * kMs, 30 * kMs)).decision, Decision::kReplanProfile);
  EXPECT_EQ(f.job.profile.period_ns, 150 * kMs);
}

// Phases longer than their gated window (30 ms) by more than overrun_ratio, with the bytes known
// (so that the profile-change rule, which compares compute and bytes, stays quiet), re-plan the
// job with the window they take; once they are shorter than that by the ratio squared, it
// follows them down. Within the ratio or the band, or for a best-effort job, nothing happens.
TEST(Controller, OverrunningPhasesGetTheWindowTheyTake) {
  Fixture f;
  f.controller.profile_change_reports = 2;
  f.BytesKnown();
  auto report = [&](int64_t comm) { return f.PhaseReport(comm); };
  EXPECT_EQ(f.Apply(report(32 * kMs)).decision, Decision::kNone);  // within 10 %
  EXPECT_EQ(f.Apply(report(32 * kMs)).decision, Decision::kNone);
  EXPECT_EQ(f.Apply(report(36 * kMs)).decision, Decision::kNone);
  const ReportVerdict v = f.Apply(report(36 * kMs));
  EXPECT_EQ(v.decision, Decision::kReplanOverrun);
  EXPECT_EQ(f.job.profile.phase_floor_ns, 36 * kMs);
  // Re-planned with a 36 ms window; the phases get faster again.
  f.job.timetable.window_ns = 36 * kMs;
  f.now += f.controller.replan_cooldown_ms * kMs;
  EXPECT_EQ(f.Apply(report(33 * kMs)).decision, Decision::kNone);  // inside the band
  EXPECT_EQ(f.Apply(report(33 * kMs)).decision, Decision::kNone);
  EXPECT_EQ(f.Apply(report(29 * kMs)).decision, Decision::kNone);  // 36 / 1.1² = 29.75
  EXPECT_EQ(f.Apply(report(29 * kMs)).decision, Decision::kReplanOverrun);
  EXPECT_EQ(f.job.profile.phase_floor_ns, 29 * kMs);

  // Phases not yet settled under the current timetable (fewer than 16 since it was made, or a
  // rank still on an older version) are no measure of it: nothing happens, however long.
  Fixture early;
  early.controller.profile_change_reports = 1;
  early.BytesKnown();
  early.job.phases_seen = 10;
  proto::ProfileReport slow = early.PhaseReport(34 * kMs);
  EXPECT_EQ(early.Apply(slow).decision, Decision::kNone);
  early.job.phases_seen = 100;
  early.rank.timetable_version = 2;
  slow.timetable_version = 2;
  EXPECT_NE(early.Apply(slow).decision, Decision::kReplanOverrun);
  EXPECT_EQ(early.job.profile.phase_floor_ns, 0);
  slow.timetable_version = 3;
  EXPECT_EQ(early.Apply(slow).decision, Decision::kReplanOverrun);

  Fixture be;
  be.job.best_effort = true;
  be.controller.profile_change_reports = 1;
  be.BytesKnown();
  EXPECT_EQ(be.Apply(be.PhaseReport(34 * kMs)).decision, Decision::kNone);
  EXPECT_EQ(be.job.profile.phase_floor_ns, 0);
}

// A widening the planning thread did not take (it would have stretched the period: the job's
// overrun_refused_ns) is not asked for again while the phases stay near it; phases longer than
// it by the ratio are.
TEST(Controller, ARefusedWideningIsNotAskedForAgainUntilThePhasesGrowFurther) {
  Fixture f;
  f.controller.profile_change_reports = 1;
  f.BytesKnown();
  f.job.overrun_refused_ns = 36 * kMs;
  auto report = [&](int64_t comm) {  // the same 70 ms of compute: no change of profile
    return f.PhaseReport(comm, 70 * kMs + comm);
  };
  EXPECT_EQ(f.Apply(report(36 * kMs)).decision, Decision::kNone);
  EXPECT_EQ(f.Apply(report(39 * kMs)).decision, Decision::kNone);  // 36 · 1.1 = 39.6
  EXPECT_EQ(f.Apply(report(40 * kMs)).decision, Decision::kReplanOverrun);
  EXPECT_EQ(f.job.profile.phase_floor_ns, 40 * kMs);
}

// A gated job of priority 2 on `link` (a 30 ms window and a 10 ms cushion every 100 ms) whose
// phases take `comm_ns`.
JobState GatedHighJob(const std::string& link, int64_t comm_ns) {
  JobState high;
  high.name = "high";
  high.id = 9;
  high.priority = 2;
  high.links = {link};
  high.planned = high.has_profile = true;
  high.timetable = {5, 0, 100 * kMs, 50 * kMs, 30 * kMs, 10 * kMs, 100 * kMs};
  high.profile.comm_ns = comm_ns;
  return high;
}

// A widening waits while a job of higher priority on the job's links runs past its own window
// and cushion: that job's phases are what runs into this window (on the testbed a low job's
// 21 ms phases took 41-50 ms while its neighbours ran late, and the wider window no longer fit its
// period). It is taken once that job keeps to its window; a neighbour of equal priority, or one
// on other links, does not hold it back.
TEST(Controller, AWideningWaitsWhileAHigherJobSpillsIntoTheWindow) {
  Fixture f;
  f.controller.profile_change_reports = 1;
  f.BytesKnown();
  f.job.name = "low";
  f.job.links = {"l1", "l2"};
  JobState high = GatedHighJob("l2", 41 * kMs);  // past its 30 ms window and 10 ms cushion
  const OutrankingNeighbours outranking = [&](const JobState& judged) {
    std::vector<const JobState*> above;
    if (OutranksOnSharedLink(high, judged)) above.push_back(&high);
    return above;
  };
  auto apply = [&](int64_t comm) {
    f.now += 100 * kMs;
    // The same 70 ms of compute: no change of profile; a new phase on its window.
    proto::ProfileReport r = f.PhaseReport(comm, 70 * kMs + comm);
    r.phase_starts_ns = f.Starts(1, 0);
    return ApplyReport(f.job, f.rank, r, f.controller, f.planning, f.now, outranking);
  };

  EXPECT_TRUE(SpillsPastCushion(high));
  ReportVerdict v = apply(40 * kMs);
  EXPECT_EQ(v.decision, Decision::kNone);
  EXPECT_EQ(v.overrun_deferred_to, "high");
  EXPECT_EQ(f.job.overrun_deferred_to, "high");
  EXPECT_EQ(f.job.profile.phase_floor_ns, 0);

  high.profile.comm_ns = 35 * kMs;  // late by 4 ms on average: 39 ms, inside its cushion
  high.lateness_ewma_ns = 4.0 * kMs;
  EXPECT_FALSE(SpillsPastCushion(high));
  high.lateness_ewma_ns = 6.0 * kMs;  // 41 ms: past it again
  EXPECT_TRUE(SpillsPastCushion(high));
  EXPECT_EQ(apply(40 * kMs).overrun_deferred_to, "high");

  // Back in its window. A report that brings no new phase (another rank's) keeps the verdict;
  // the next phase's report takes the widening.
  high.lateness_ewma_ns = 0.0;
  f.now += 10 * kMs;
  EXPECT_EQ(ApplyReport(f.job, f.rank, f.PhaseReport(40 * kMs, 110 * kMs), f.controller, f.planning,
                        f.now, outranking)
                .overrun_deferred_to,
            "high");
  v = apply(40 * kMs);
  EXPECT_EQ(v.decision, Decision::kReplanOverrun);
  EXPECT_TRUE(v.overrun_deferred_to.empty());
  EXPECT_TRUE(f.job.overrun_deferred_to.empty());
  EXPECT_EQ(f.job.profile.phase_floor_ns, 40 * kMs);

  // Equal priority, other links, a best-effort job (no window to spill from): never a cause.
  high.profile.comm_ns = 60 * kMs;
  high.priority = 0;
  EXPECT_FALSE(OutranksOnSharedLink(high, f.job));
  high.priority = 2;
  high.links = {"l3"};
  EXPECT_FALSE(OutranksOnSharedLink(high, f.job));
  high.links = {"l1"};
  EXPECT_TRUE(OutranksOnSharedLink(high, f.job));
  EXPECT_FALSE(OutranksOnSharedLink(f.job, high));  // lower priority
  high.best_effort = true;
  EXPECT_FALSE(SpillsPastCushion(high));
}

// A higher job that keeps spilling (for traffic the plan does not control, say) holds a widening
// back for at most twice the reports the rule needs: then the widening is taken.
TEST(Controller, AWideningWaitsForAHigherJobOnlySoLong) {
  Fixture f;
  f.controller.profile_change_reports = 2;  // the wait: at most 4 intervals of the job
  f.BytesKnown();
  f.job.links = {"l1"};
  const JobState high = GatedHighJob("l1", 60 * kMs);  // spills, and keeps spilling
  const OutrankingNeighbours outranking = [&](const JobState&) {
    return std::vector<const JobState*>{&high};
  };
  std::vector<Decision> decisions;
  for (int k = 0; k < 7; ++k) {
    f.now += 100 * kMs;
    proto::ProfileReport r = f.PhaseReport(40 * kMs, 110 * kMs);
    r.phase_starts_ns = f.Starts(1, 0);
    decisions.push_back(
        ApplyReport(f.job, f.rank, r, f.controller, f.planning, f.now, outranking).decision);
  }
  // Due from the second report on; deferred at the second to the fifth; widened at the sixth.
  const std::vector<Decision> expected = {
      Decision::kNone, Decision::kNone,          Decision::kNone, Decision::kNone,
      Decision::kNone, Decision::kReplanOverrun, Decision::kNone};
  EXPECT_EQ(decisions, expected);
  EXPECT_EQ(f.job.profile.phase_floor_ns, 40 * kMs);
}

TEST(Controller, StaleTimetableIsPushedAgain) {
  Fixture f;
  auto r = f.Report({});
  r.timetable_version = 2;
  EXPECT_TRUE(f.Apply(r).repush);
  f.rank.last_push_ns = f.now + 100 * kMs;  // just pushed: give it time to arrive
  EXPECT_FALSE(f.Apply(r).repush);
}

// Every rank of a job reports the same phases and holds them at its own gate: one late interval
// of an 8-rank job is one late report, not eight in a row.
// Each rank's wait is a counter bounded only below: the job's sum saturates instead of wrapping
// to a negative total (the yield-wait metric would then run backwards).
TEST(Controller, TheJobsYieldWaitSaturates) {
  Fixture f;
  std::vector<RankState> ranks(2, f.rank);
  for (RankState& rank : ranks) {
    auto r = f.Report({});
    r.yielded = 1;
    r.yield_wait_ns = std::numeric_limits<int64_t>::max();
    ApplyReport(f.job, rank, r, f.controller, f.planning, f.now);
  }
  EXPECT_EQ(f.job.yield_wait_ns, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(f.job.yielded, 2u);
}

// A period under a timetable's least (100 µs) is measured, not planned: no profile from it.
TEST(Controller, APeriodUnderTheTimetablesLeastIsNoProfile) {
  Fixture f;
  f.job.has_profile = false;
  auto r = f.Report({}, 50'000, 10'000);
  ApplyReport(f.job, f.rank, r, f.controller, f.planning, f.now);
  EXPECT_FALSE(f.job.has_profile);
  r = f.Report({}, 100 * kMs, 30 * kMs);
  ApplyReport(f.job, f.rank, r, f.controller, f.planning, f.now);
  EXPECT_TRUE(f.job.has_profile);
}

TEST(Controller, OneLateIntervalOfManyRanksIsOneLateReport) {
  Fixture f;
  f.controller.late_reports = 3;
  std::vector<RankState> ranks(8, f.rank);
  const auto starts = f.Starts(1, 40 * kMs);
  for (RankState& rank : ranks) {
    auto r = f.Report(starts);
    r.late = 1;  // each rank held the phase at its gate
    f.now += kMs;
    const ReportVerdict v = ApplyReport(f.job, rank, r, f.controller, f.planning, f.now);
    EXPECT_EQ(v.decision, Decision::kNone);
  }
  EXPECT_EQ(f.job.consecutive_late_reports, 1u);
  // The next two late intervals make three late reports: the re-plan.
  for (int interval = 1; interval <= 2; ++interval) {
    f.now += 100 * kMs;
    const auto next = f.Starts(1, 40 * kMs);
    int replans = 0;
    Decision first = Decision::kNone;
    for (size_t i = 0; i < ranks.size(); ++i) {
      auto r = f.Report(next);
      r.late = 1 + interval;
      f.now += kMs;
      const Decision d = ApplyReport(f.job, ranks[i], r, f.controller, f.planning, f.now).decision;
      if (i == 0) first = d;
      replans += d == Decision::kReplanLateness ? 1 : 0;
    }
    EXPECT_EQ(first, interval == 2 ? Decision::kReplanLateness : Decision::kNone);
    EXPECT_EQ(replans, interval == 2 ? 1 : 0);
  }
}

TEST(Controller, BestEffortJobsAreNeverLate) {
  Fixture f;
  f.job.best_effort = true;
  f.controller.late_reports = 1;
  EXPECT_EQ(f.Apply(f.Report(f.Starts(2, 40 * kMs))).decision, Decision::kNone);
}

TEST(Controller, AJobPlannedNotGatedIsNeverLate) {
  Fixture f;
  f.controller.late_reports = 1;
  f.job.timetable.window_ns = f.job.timetable.period_ns;  // "not gated"
  f.job.timetable.late_slack_ns = 0;
  f.job.timetable.max_wait_ns = 0;
  const ReportVerdict v = f.Apply(f.Report(f.Starts(3, 40 * kMs)));
  EXPECT_EQ(v.new_phases, 3u);
  EXPECT_EQ(v.late_phases, 0u);
  EXPECT_EQ(v.decision, Decision::kNone);
  EXPECT_EQ(f.job.phases_late, 0u);
  // The same phases under a gated window are late (the control case).
  Fixture g;
  g.controller.late_reports = 1;
  EXPECT_EQ(g.Apply(g.Report(g.Starts(3, 40 * kMs))).late_phases, 3u);
}

}  // namespace
}  // namespace metronome::controller
