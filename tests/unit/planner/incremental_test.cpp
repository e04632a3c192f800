// What the service's planning round recomputes only where something changed since the last
// round: the online planner's snapshot (detail::Reevaluate) and the ranked yields (with a
// RankedYieldsMemo). Through random adds, replacements, removals and whole re-plans each must
// give exactly what computing it afresh gives.
#include <gtest/gtest.h>

#include <random>

#include "metronome/planner/generator.hpp"
#include "metronome/planner/planner.hpp"
#include "metronome/planner/ranked_yields.hpp"
#include "planner_test_util.hpp"
#include "workspace.hpp"

namespace metronome::planner {
namespace {

void ExpectSamePlan(const Plan& got, const Plan& want, const std::string& step) {
  SCOPED_TRACE(step);
  ASSERT_EQ(got.jobs.size(), want.jobs.size());
  for (std::size_t i = 0; i < want.jobs.size(); ++i) {
    const JobPlan& g = got.jobs[i];
    const JobPlan& w = want.jobs[i];
    EXPECT_EQ(g.id, w.id);
    EXPECT_TRUE(g.timetable == w.timetable) << "job " << w.id;
    EXPECT_EQ(g.best_effort, w.best_effort) << "job " << w.id;
    EXPECT_EQ(g.predicted_slowdown, w.predicted_slowdown) << "job " << w.id;
  }
  ASSERT_EQ(got.links.size(), want.links.size());
  for (std::size_t l = 0; l < want.links.size(); ++l) {
    const LinkPlan& g = got.links[l];
    const LinkPlan& w = want.links[l];
    EXPECT_EQ(g.link, w.link);
    EXPECT_EQ(g.hyperperiod_ns, w.hyperperiod_ns) << "link " << l;
    EXPECT_EQ(g.served_load, w.served_load) << "link " << l;
    EXPECT_EQ(g.min_cushion_ns, w.min_cushion_ns) << "link " << l;
    EXPECT_EQ(g.contention, w.contention) << "link " << l;
    EXPECT_EQ(g.gated_jobs, w.gated_jobs) << "link " << l;
    EXPECT_EQ(g.best_effort_jobs, w.best_effort_jobs) << "link " << l;
  }
  EXPECT_EQ(got.score.served_by_priority, want.score.served_by_priority);
  EXPECT_EQ(got.score.utilization, want.score.utilization);
  EXPECT_EQ(got.score.latency, want.score.latency);
  EXPECT_EQ(got.score.cushion_ns, want.score.cushion_ns);
}

void ExpectSameYields(const std::vector<JobYields>& got, const std::vector<JobYields>& want,
                      const std::string& step) {
  SCOPED_TRACE(step);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].yielded_to, want[i].yielded_to) << "entry " << i;
    ASSERT_EQ(got[i].yields == nullptr, want[i].yields == nullptr) << "entry " << i;
    if (want[i].yields) {
      EXPECT_TRUE(*got[i].yields == *want[i].yields) << "entry " << i;
    }
  }
}

// A planner and what a service round computes from it: the snapshot, and the ranked yields
// through one memo kept from round to round.
struct Rounds {
  OnlinePlanner& planner;
  RankedYieldsMemo memo;

  void Check(const std::string& step) {
    const Plan plan = planner.Snapshot();
    ExpectSamePlan(plan, detail::Evaluate(planner.GetWorkspace()), step);
    const std::vector<Job> jobs = planner.Jobs();
    const PlannerOptions& o = planner.Options();
    ExpectSameYields(RankedYields(planner.GetTopology(), jobs, plan, o, memo),
                     RankedYields(planner.GetTopology(), jobs, plan, o), step);
  }
};

// Crowded: few nodes, most jobs across racks, many of them slower than their uplink (they
// stack), a hot link: gated, stretched, best-effort and contended jobs side by side.
GeneratorSpec Crowded(std::uint64_t seed) {
  GeneratorSpec s;
  s.racks = 3;
  s.nodes_per_rack = 4;
  s.jobs = 60;
  s.seed = seed;
  s.cross_rack_share = 0.6;
  s.limited_beta_share = 0.5;
  s.compute_jitter = 0.02;
  s.hot_link_jobs = 12;
  s.hot_link_bps = 20e9;
  return s;
}

TEST(Incremental, EveryRoundEqualsAFreshComputation) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const GeneratorSpec spec = Crowded(seed);
    const Problem p = Generate(spec);
    OnlinePlanner planner(p.topology);
    Rounds rounds{planner, {}};
    std::mt19937_64 rng(seed);
    const auto check = [&](const std::string& what) {
      rounds.Check("seed " + std::to_string(seed) + ": " + what);
    };
    JobId next = 10'000;
    for (std::size_t i = 0; i < p.jobs.size(); ++i) {
      const Job& job = p.jobs[i];
      if (rng() % 3 == 0) {
        planner.AddJobFirst(job);
      } else {
        planner.AddJob(job);
      }
      check("add " + std::to_string(job.id));
      const auto jobs = planner.Jobs();
      switch (rng() % 6) {
        case 0: {  // a departure
          const JobId gone = jobs[rng() % jobs.size()].id;
          planner.RemoveJob(gone);
          check("remove " + std::to_string(gone));
          break;
        }
        case 1: {  // a re-plan with a changed profile (the controller's rules)
          Job changed = jobs[rng() % jobs.size()];
          changed.profile.comm_ns = changed.profile.comm_ns * 5 / 4;
          planner.AddJob(changed);
          check("replace " + std::to_string(changed.id));
          break;
        }
        case 2: {  // churn: a leaver's place taken by a newcomer drawn afresh
          const JobId gone = jobs[rng() % jobs.size()].id;
          planner.RemoveJob(gone);
          planner.AddJob(GenerateJob(spec, planner.GetTopology(), next++, rng()));
          check("churn " + std::to_string(gone));
          break;
        }
        case 3:
          check("nothing changed");
          break;
        default:
          break;
      }
      if (i % 20 == 19) {  // a whole re-plan, then a plan adopted as it is
        const Plan current = planner.Snapshot();
        planner.PlanAll(planner.Jobs(), &current);
        check("plan all");
        const Plan again = planner.Snapshot();
        planner.Adopt(planner.Jobs(), again);
        check("adopt");
      }
    }
  }
}

// Jobs on a few explicit links, each crossing one to three of them, long on the wire: many end
// best-effort and yield to windows on one link while other links of theirs change.
TEST(Incremental, ExplicitLinkGraphsWithDriftingJobs) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 40; ++round) {
    OnlinePlanner planner(testing::Links(5));
    Rounds rounds{planner, {}};
    std::vector<JobId> present;
    for (JobId id = 1; id <= 40; ++id) {
      if (!present.empty() && rng() % 3 == 0) {
        const std::size_t k = rng() % present.size();
        planner.RemoveJob(present[k]);
        present.erase(present.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        Job job;
        job.id = id;
        job.priority = static_cast<int>(rng() % 4);
        const int nl = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < nl; ++k) job.extra_links.push_back(static_cast<LinkId>(rng() % 5));
        static constexpr Nanos kPeriods[] = {50, 100, 150, 200, 300};
        job.profile.period_ns = kPeriods[rng() % 5] * testing::kMs;
        job.profile.comm_ns = job.profile.period_ns * static_cast<Nanos>(10 + rng() % 60) / 100;
        job.profile.beta_bps = testing::kCap * (0.3 + 0.1 * static_cast<double>(rng() % 8));
        planner.AddJob(job);
        present.push_back(id);
      }
      rounds.Check("round " + std::to_string(round) + ", job " + std::to_string(id));
    }
  }
}

}  // namespace
}  // namespace metronome::planner
