// Planner benchmarks on a generated two-tier cluster: 512 nodes in 64 racks (100 Gb/s node
// uplinks, 400 Gb/s rack uplinks) and N jobs of mixed sizes and priorities (generator.hpp,
// seed 42). The argument of every benchmark is the job count N.
//
//   BM_FullPlan/N         plan all N jobs from scratch (stages 1–3 and the Plan's evaluation)
//   BM_AddJob/N           add one job to a planned cluster (OnlinePlanner::add_job)
//   BM_WhatIf1000Nodes/N  what-if for one job over 1,000 candidate node sets
//   BM_Snapshot/N         the online planner's snapshot with nothing changed since the last
//                         one (its memo's comparisons, the plan's copy and score)
//   BM_Cassini/N, BM_NoTimeScheduling/N   the baselines, for comparison
//   BM_FullPlanJitter/N   BM_FullPlan with 2 % compute jitter and a 100 µs minimum cushion:
//                         every window reserves its cushion, every period its headroom
//
// At cluster scale: 8,192 nodes (1,024 racks of 8), 10,000 jobs, the first H multi-node jobs
// also crossing one 6.4 Tb/s "hot" link (a spine crossed by hundreds of jobs of mixed periods).
// The argument is H.
//   BM_ClusterFullPlan/H  plan all 10,000 jobs from scratch
//   BM_ClusterAddRemove/H add one job, then remove it; counters: p50 and p99 of each (ms)
//   BM_ClusterWhatIf/H    what-if for one job over 1,000 candidate node sets
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "metronome/planner/baselines.hpp"
#include "metronome/planner/generator.hpp"
#include "metronome/planner/planner.hpp"
#include "metronome/planner/what_if.hpp"

namespace mp = metronome::planner;

namespace {

mp::GeneratorSpec Spec(std::int64_t jobs) {
  mp::GeneratorSpec s;  // 64 racks × 8 nodes, seed 42
  s.jobs = static_cast<std::uint32_t>(jobs);
  return s;
}

const mp::Problem& Problem(std::int64_t jobs, double jitter = 0.0) {
  static std::map<std::pair<std::int64_t, double>, mp::Problem> cache;
  auto it = cache.find({jobs, jitter});
  if (it == cache.end()) {
    mp::GeneratorSpec s = Spec(jobs);
    s.compute_jitter = jitter;
    it = cache.emplace(std::make_pair(jobs, jitter), mp::Generate(s)).first;
  }
  return it->second;
}

// Counters: best-effort jobs, gated jobs whose period was stretched, served load (Σ links).
void Report(benchmark::State& state, const mp::Problem& p, const mp::Plan& plan) {
  std::size_t best_effort = 0;
  std::size_t stretched = 0;
  for (std::size_t i = 0; i < plan.jobs.size(); ++i) {
    const mp::JobPlan& e = plan.jobs[i];  // plan() keeps the problem's job order
    best_effort += e.best_effort ? 1 : 0;
    stretched += (!e.best_effort && e.timetable.period_ns > p.jobs[i].profile.period_ns) ? 1 : 0;
  }
  state.counters["best_effort"] = static_cast<double>(best_effort);
  state.counters["stretched"] = static_cast<double>(stretched);
  state.counters["utilization"] = plan.score.utilization;
}

// Plans `p` from scratch once per iteration; returns the last plan.
mp::Plan TimeFullPlan(benchmark::State& state, const mp::Problem& p,
                      const mp::PlannerOptions& options = {}) {
  mp::Plan plan;
  for (auto _ : state) {
    plan = mp::MakePlan(p, options);
    benchmark::DoNotOptimize(plan.jobs.data());
  }
  return plan;
}

void BmFullPlan(benchmark::State& state) {
  const mp::Problem& p = Problem(state.range(0));
  Report(state, p, TimeFullPlan(state, p));
}

void BmFullPlanJitter(benchmark::State& state) {
  const mp::Problem& p = Problem(state.range(0), 0.02);
  mp::PlannerOptions o;
  o.min_cushion_ns = 100'000;
  Report(state, p, TimeFullPlan(state, p, o));
}

void BmSnapshot(benchmark::State& state) {
  const mp::Problem& p = Problem(state.range(0));
  mp::OnlinePlanner planner(p.topology);
  planner.PlanAll(p.jobs);
  for (auto _ : state) {
    mp::Plan plan = planner.Snapshot();
    benchmark::DoNotOptimize(plan.jobs.data());
  }
}

void BmAddJob(benchmark::State& state) {
  const mp::Problem& p = Problem(state.range(0));
  mp::OnlinePlanner planner(p.topology);
  planner.PlanAll(p.jobs);
  std::vector<mp::Job> arrivals;
  for (std::uint64_t k = 0; k < 64; ++k) {
    arrivals.push_back(mp::GenerateJob(Spec(state.range(0)), p.topology, 1'000'000 + k, 1000 + k));
  }
  std::size_t next = 0;
  std::size_t gated = 0;
  std::size_t total = 0;
  for (auto _ : state) {
    const mp::Job& job = arrivals[next++ % arrivals.size()];
    const mp::AddResult r = planner.AddJob(job);
    benchmark::DoNotOptimize(r.job.timetable.offset_ns);
    state.PauseTiming();
    gated += r.job.best_effort ? 0 : 1;
    ++total;
    planner.RemoveJob(job.id);
    state.ResumeTiming();
  }
  state.counters["gated_share"] =
      total ? static_cast<double>(gated) / static_cast<double>(total) : 0.0;
}

// What-if for one two-pod job of `spec` over 1,000 candidate placements (node pairs drawn with
// a fixed seed) on a planned `p`; counter: the candidates where it would be gated.
void TimeWhatIf(benchmark::State& state, const mp::Problem& p, const mp::GeneratorSpec& spec) {
  mp::OnlinePlanner planner(p.topology);
  planner.PlanAll(p.jobs);
  const mp::Job job = mp::GenerateJob(spec, p.topology, 2'000'000, 7);
  std::mt19937_64 rng(11);
  std::vector<std::vector<mp::NodeId>> candidates;
  candidates.reserve(1000);
  const auto nodes = static_cast<std::uint32_t>(p.topology.NodeCount());
  for (int c = 0; c < 1000; ++c) {
    candidates.push_back(
        {static_cast<mp::NodeId>(rng() % nodes), static_cast<mp::NodeId>(rng() % nodes)});
  }
  std::size_t gated = 0;
  for (auto _ : state) {
    const auto results = mp::WhatIf(planner, job, candidates);
    benchmark::DoNotOptimize(results.data());
    gated = 0;
    for (const auto& r : results) gated += r.gated ? 1 : 0;
  }
  state.counters["gated_candidates"] = static_cast<double>(gated);
}

void BmWhatIf1000Nodes(benchmark::State& state) {
  TimeWhatIf(state, Problem(state.range(0)), Spec(state.range(0)));
}

void BmCassini(benchmark::State& state) {
  const mp::Problem& p = Problem(state.range(0));
  for (auto _ : state) {
    mp::Plan plan = mp::PlanCassini(p);
    benchmark::DoNotOptimize(plan.jobs.data());
  }
}

void BmNoTimeScheduling(benchmark::State& state) {
  const mp::Problem& p = Problem(state.range(0));
  for (auto _ : state) {
    mp::Plan plan = mp::PlanWithoutTimeScheduling(p);
    benchmark::DoNotOptimize(plan.jobs.data());
  }
}

mp::GeneratorSpec ClusterSpec(std::int64_t hot_jobs) {
  mp::GeneratorSpec s;
  s.racks = 1024;
  s.nodes_per_rack = 8;
  s.jobs = 10'000;
  s.hot_link_jobs = static_cast<std::uint32_t>(hot_jobs);
  return s;
}

const mp::Problem& ClusterProblem(std::int64_t hot_jobs) {
  static std::map<std::int64_t, mp::Problem> cache;
  auto it = cache.find(hot_jobs);
  if (it == cache.end()) it = cache.emplace(hot_jobs, mp::Generate(ClusterSpec(hot_jobs))).first;
  return it->second;
}

// Counters of the hot link's jobs: how many are gated.
void ReportHot(benchmark::State& state, const mp::Problem& p, const mp::Plan& plan) {
  Report(state, p, plan);
  std::size_t hot = 0;
  std::size_t gated = 0;
  for (std::size_t i = 0; i < p.jobs.size(); ++i) {
    if (p.jobs[i].extra_links.empty()) continue;
    ++hot;
    gated += plan.jobs[i].best_effort ? 0 : 1;
  }
  state.counters["hot_jobs"] = static_cast<double>(hot);
  state.counters["hot_gated"] = static_cast<double>(gated);
}

// The jobs' connected parts (jobs that share a link, and so on): how many, and the jobs of the
// largest. The service plans parts apart (controller.planning_parts); one part is one planner's.
void ReportConnectedParts(benchmark::State& state, const mp::Problem& p) {
  if (p.jobs.empty()) return;
  std::vector<std::vector<mp::LinkId>> links;
  links.reserve(p.jobs.size());
  for (const mp::Job& j : p.jobs) links.push_back(mp::JobLinks(p.topology, j));
  std::vector<std::size_t> members(p.jobs.size());  // by group
  for (const std::size_t g : mp::LinkGroups(links)) ++members[g];
  const auto groups = static_cast<std::size_t>(
      std::count_if(members.begin(), members.end(), [](std::size_t n) { return n > 0; }));
  state.counters["parts"] = static_cast<double>(groups);
  state.counters["largest_part"] =
      static_cast<double>(*std::max_element(members.begin(), members.end()));
}

void BmClusterFullPlan(benchmark::State& state) {
  const mp::Problem& p = ClusterProblem(state.range(0));
  ReportHot(state, p, TimeFullPlan(state, p));
  ReportConnectedParts(state, p);
}

double PercentileMs(std::vector<double>& ms, double q) {
  if (ms.empty()) return 0.0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1));
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(k), ms.end());
  return ms[k];
}

// The arriving jobs cross the hot link when there is one, as the jobs already there do.
void BmClusterAddRemove(benchmark::State& state) {
  const mp::Problem& p = ClusterProblem(state.range(0));
  mp::OnlinePlanner planner(p.topology);
  planner.PlanAll(p.jobs);
  const mp::GeneratorSpec spec = ClusterSpec(state.range(0));
  const auto hot = std::find_if(p.jobs.begin(), p.jobs.end(),
                                [](const mp::Job& j) { return !j.extra_links.empty(); });
  std::vector<mp::Job> arrivals;
  for (std::uint64_t k = 0; arrivals.size() < 256; ++k) {
    mp::Job job = mp::GenerateJob(spec, p.topology, 1'000'000 + k, 1000 + k);
    if (job.nodes.size() < 2) continue;
    if (hot != p.jobs.end()) job.extra_links = hot->extra_links;
    arrivals.push_back(std::move(job));
  }
  std::vector<double> add_ms;
  std::vector<double> remove_ms;
  std::size_t next = 0;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const mp::Job& job = arrivals[next++ % arrivals.size()];
    const auto t0 = Clock::now();
    const mp::AddResult r = planner.AddJob(job);
    benchmark::DoNotOptimize(r.job.timetable.offset_ns);
    const auto t1 = Clock::now();
    planner.RemoveJob(job.id);
    const auto t2 = Clock::now();
    add_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    remove_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  state.counters["add_p50_ms"] = PercentileMs(add_ms, 0.50);
  state.counters["add_p99_ms"] = PercentileMs(add_ms, 0.99);
  state.counters["remove_p50_ms"] = PercentileMs(remove_ms, 0.50);
  state.counters["remove_p99_ms"] = PercentileMs(remove_ms, 0.99);
}

void BmClusterWhatIf(benchmark::State& state) {
  TimeWhatIf(state, ClusterProblem(state.range(0)), ClusterSpec(state.range(0)));
}

void ClusterSizes(benchmark::internal::Benchmark* b) {
  for (const std::int64_t hot : {0, 300}) b->Arg(hot);
  b->Unit(benchmark::kMillisecond);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (const std::int64_t n : {250, 500, 1000, 2000, 4000}) b->Arg(n);
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BmFullPlan)->Apply(Sizes);
BENCHMARK(BmAddJob)->Apply(Sizes);
BENCHMARK(BmWhatIf1000Nodes)->Apply(Sizes);
BENCHMARK(BmSnapshot)->Apply(Sizes);
BENCHMARK(BmCassini)->Apply(Sizes);
BENCHMARK(BmNoTimeScheduling)->Apply(Sizes);
BENCHMARK(BmFullPlanJitter)->Apply(Sizes);
BENCHMARK(BmClusterFullPlan)->Apply(ClusterSizes);
BENCHMARK(BmClusterAddRemove)->Apply(ClusterSizes)->Iterations(2000);
BENCHMARK(BmClusterWhatIf)->Apply(ClusterSizes);

BENCHMARK_MAIN();
