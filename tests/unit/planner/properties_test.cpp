// Randomized property tests: every plan from random instances passes the independent checker
// and keeps the model's invariants, through full plans, re-plans and job-by-job changes.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "metronome/planner/generator.hpp"
#include "metronome/planner/planner.hpp"
#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

// Invariants beyond feasibility: periods within the stretch bound, late slack within the
// period, link entries (hyperperiod = lcm of the gated periods, counts) consistent with the jobs.
void ExpectInvariants(const Problem& p, const Plan& plan, const PlannerOptions& o = {}) {
  std::map<LinkId, std::vector<Nanos>> periods;
  for (const Job& job : p.jobs) {
    const JobPlan* e = plan.Find(job.id);
    ASSERT_NE(e, nullptr);
    if (e->best_effort) continue;
    const auto links = JobLinks(p.topology, job);
    if (links.empty()) continue;
    EXPECT_GE(e->timetable.period_ns, job.profile.period_ns);
    EXPECT_LE(static_cast<double>(e->timetable.period_ns),
              o.max_stretch * static_cast<double>(job.profile.period_ns));
    EXPECT_LE(e->timetable.late_slack_ns, e->timetable.period_ns - e->timetable.window_ns);
    for (const LinkId l : links) periods[l].push_back(e->timetable.period_ns);
  }
  for (const auto& [l, ps] : periods) {
    Nanos lcm = 1;
    for (const Nanos a : ps) lcm = std::lcm(lcm, a);
    EXPECT_EQ(plan.links[l].hyperperiod_ns, lcm);
    EXPECT_EQ(plan.links[l].gated_jobs, ps.size());
    EXPECT_LE(plan.links[l].served_load, 1.0 + 1e-9);
  }
}

GeneratorSpec Small(std::uint64_t seed, std::uint32_t jobs) {
  GeneratorSpec s;
  s.racks = 4;
  s.nodes_per_rack = 4;
  s.jobs = jobs;
  s.seed = seed;
  return s;
}

TEST(Properties, RandomInstancesGiveFeasiblePlans) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    const Problem p = Generate(Small(seed, 5 + static_cast<std::uint32_t>(seed % 40)));
    const Plan plan = planner::MakePlan(p);
    EXPECT_FEASIBLE(p, plan);
    ExpectInvariants(p, plan);
  }
}

TEST(Properties, RandomExplicitLinkGraphsWithCyclesGiveFeasiblePlans) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 60; ++round) {
    Problem p{testing::Links(5), {}};
    const int n = 3 + static_cast<int>(rng() % 12);
    for (int j = 0; j < n; ++j) {
      Job job;
      job.id = static_cast<JobId>(j) + 1;
      job.priority = static_cast<int>(rng() % 3);
      const int nl = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < nl; ++k) job.extra_links.push_back(static_cast<LinkId>(rng() % 5));
      static constexpr Nanos kPeriods[] = {50, 100, 150, 200, 300};
      job.profile.period_ns = kPeriods[rng() % 5] * testing::kMs;
      job.profile.comm_ns = job.profile.period_ns * static_cast<Nanos>(5 + rng() % 40) / 100;
      job.profile.beta_bps =
          testing::kCap * ((rng() % 4 == 0) ? 0.3 + 0.1 * static_cast<double>(rng() % 5) : 1.0);
      p.jobs.push_back(job);
    }
    const Plan plan = planner::MakePlan(p);
    EXPECT_FEASIBLE(p, plan);
    ExpectInvariants(p, plan);
  }
}

TEST(Properties, ReplanningWithTheCurrentPlanStaysFeasibleAndStill) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Problem p = Generate(Small(seed, 30));
    const Plan before = planner::MakePlan(p);
    p.jobs.erase(p.jobs.begin() + static_cast<std::ptrdiff_t>(seed % p.jobs.size()));
    const Plan after = planner::MakePlan(p, {}, &before);
    EXPECT_FEASIBLE(p, after);
    ExpectInvariants(p, after);
    // With nobody waiting (no best-effort, no stretched job), nobody moves.
    bool waiting = false;
    for (const Job& j : p.jobs) {
      const JobPlan* b = before.Find(j.id);
      waiting = waiting || b->best_effort || b->timetable.period_ns != j.profile.period_ns;
    }
    if (waiting) continue;
    for (const JobPlan& e : after.jobs) {
      EXPECT_EQ(e.timetable.offset_ns, before.Find(e.id)->timetable.offset_ns);
    }
  }
}

TEST(Properties, JobByJobChangesStayFeasible) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const Problem p = Generate(Small(seed, 40));
    OnlinePlanner planner(p.topology);
    std::mt19937_64 rng(seed);
    for (const Job& job : p.jobs) {
      planner.AddJob(job);
      if (rng() % 4 == 0) {
        const auto jobs = planner.Jobs();
        planner.RemoveJob(jobs[rng() % jobs.size()].id);
      }
    }
    const Problem now{planner.GetTopology(), planner.Jobs()};
    const Plan plan = planner.Snapshot();
    EXPECT_FEASIBLE(now, plan);
    ExpectInvariants(now, plan);
  }
}

TEST(Properties, TheBenchmarkClusterGivesAFeasiblePlan) {
  const Problem p = Generate(GeneratorSpec{});  // 512 nodes, 64 racks, 1,000 jobs, seed 42
  const Plan plan = planner::MakePlan(p);
  EXPECT_FEASIBLE(p, plan);
  ExpectInvariants(p, plan);
  // Not degenerate: a large share is gated. Not all: a job is stretched to a harmonic only when
  // that costs less than its contention (stage 2), and many of these multi-rack jobs meet
  // unrelated periods. 463 of 1,000 since a neighbour met on several links counts once there.
  std::size_t gated = 0;
  for (const JobPlan& e : plan.jobs) gated += e.best_effort ? 0 : 1;
  EXPECT_GT(gated, p.jobs.size() * 2 / 5);
}

}  // namespace
}  // namespace metronome::planner
