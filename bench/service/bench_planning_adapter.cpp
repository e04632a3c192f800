// The scheduler's planning round on a 512-node cluster (64 racks × 8 nodes, 100 Gb/s node
// uplinks, 400 Gb/s rack uplinks; 1,024 racks for 2,048 jobs and more, as the load driver's
// 65,536-rank runs), as a planning round runs it when a job is replaced: the
// leaver removed, the newcomer added, the plan summarized for the pushes. The argument is the
// number of planned jobs (4 ranks each, priorities 0–2, profiles as the load driver reports
// them): a newcomer that outranks a neighbour re-plans its component (PlanningAdapter).
//
//   BM_ReplaceJob/apart/N   jobs on 4 consecutive nodes of one rack: no link is shared (the
//                           load driver's layout)
//   BM_ReplaceJob/spread/N  jobs on 4 nodes of 4 racks: rack uplinks carry many jobs each
//   BM_Summary/spread/N     Summary() alone after a change (what every push waits for)
//   BM_ReplaceJob/onelink/N the scheduler's embedded default topology: one 100 Gbit/s link that
//                           every job crosses (the load driver's --one-link)
//   BM_Burst/spread/N       every job's first profile in one round, as after a restart of the
//                           scheduler (the load driver's "push at start"): N jobs planned and
//                           summarized at once
//   BM_TakeOver/apart/N     a new leader after a takeover: the last plan inherited (Inherit), the
//                           N jobs registering again in rounds of 64 (each round planned and
//                           summarized)
//   BM_TurnSets/apart/N     whom each of N measured jobs takes turns with (TwoJobLinks), all
//                           recomputed as the service does after every join or leave: jobs on
//                           4 nodes of one rack, no link shared (the load driver's layout)
//   BM_TurnSets/pairs/N     the same, each job sharing one 10 Gbit/s link with one other: every
//                           job gets a partner
// Counters: p50, p99 and max of one replacement (or round) with its summary (ms), what a push
// waits for; BM_TakeOver also the whole takeover (total_ms).
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "metronome/controller/config.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/controller/turns.hpp"

namespace ms = metronome::controller;

namespace {

constexpr int kNodesPerRack = 8;
int g_racks = 64;  // 1,024 for 2,048 jobs or more

ms::TopologyConfig Topology(bool one_link) {
  if (one_link) return ms::TopologyConfig::Default();
  ms::TopologyConfig t;
  t.two_tier = ms::TopologyConfig::TwoTier{static_cast<uint32_t>(g_racks), kNodesPerRack, 100e9 / 8,
                                           400e9 / 8};
  return t;
}

std::string Node(int n) {
  n %= g_racks * kNodesPerRack;
  char name[32];
  std::snprintf(name, sizeof name, "r%dn%d", n / kNodesPerRack, n % kNodesPerRack);
  return name;
}

// Job `id` (1-based) as the load driver's rank 0 reports it: period 200–400 ms, 20 ms phases, no
// jitter measured (planned with the 1 % prior).
ms::PlanJob Job(uint64_t id, bool spread) {
  ms::PlanJob j;
  j.id = id;
  j.name = std::to_string(id);
  j.priority = static_cast<int>((id * 7919) % 3);  // 0–2, mixed among neighbours
  const int i = static_cast<int>(id % static_cast<uint64_t>(g_racks * kNodesPerRack / 4));
  for (int r = 0; r < 4; ++r) {
    j.nodes.push_back(spread ? Node(r * kNodesPerRack * 16 + i) : Node(i * 4 + r));
  }
  j.profile.period_ns = 200'000'000 + static_cast<int64_t>(id % 5) * 50'000'000;
  j.profile.comm_ns = 20'000'000;
  return j;
}

// The benchmark's `n` jobs (ids 1..n) on a cluster sized for them (sets g_racks first).
std::vector<ms::PlanJob> Jobs(uint64_t n, bool spread) {
  g_racks = n >= 2048 ? 1024 : 64;
  std::vector<ms::PlanJob> all;
  for (uint64_t id = 1; id <= n; ++id) all.push_back(Job(id, spread));
  return all;
}

// p50, p99 and max of the rounds timed (ms), as counters.
void RoundCounters(benchmark::State& state, std::vector<double>& round_ms) {
  std::sort(round_ms.begin(), round_ms.end());
  const auto at = [&](double q) {
    return round_ms[static_cast<size_t>(q * static_cast<double>(round_ms.size() - 1))];
  };
  state.counters["round_p50_ms"] = at(0.50);
  state.counters["round_p99_ms"] = at(0.99);
  state.counters["round_max_ms"] = round_ms.back();
}

void ReplaceJob(benchmark::State& state, bool spread, bool summary_only, bool one_link = false) {
  const auto n = static_cast<uint64_t>(state.range(0));
  const std::vector<ms::PlanJob> all = Jobs(n, spread);
  ms::PlanningAdapter adapter(Topology(one_link), ms::PlanningConfig{});
  (void)adapter.AddJobs(all);
  (void)adapter.Summary();
  uint64_t next = n + 1;
  std::vector<double> round_ms;  // what a push waits for: one round, percentiles below
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    // The newcomer takes the leaver's place (its nodes and profile), as under churn.
    const uint64_t leaver = next - n;
    const auto t0 = Clock::now();
    if (summary_only) state.PauseTiming();
    adapter.RemoveJob(leaver);
    ms::PlanJob fresh = Job(leaver, spread);
    fresh.id = next++;
    (void)adapter.AddJobs({fresh});
    if (summary_only) state.ResumeTiming();
    benchmark::DoNotOptimize(adapter.Summary());
    round_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  RoundCounters(state, round_ms);
}

void BmTakeOver(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);  // a line per round otherwise
  const auto n = static_cast<uint64_t>(state.range(0));
  const std::vector<ms::PlanJob> all = Jobs(n, false);
  std::map<std::string, metronome::Timetable> last;  // what the old leader published
  {
    ms::PlanningAdapter old_leader(Topology(false), ms::PlanningConfig{});
    (void)old_leader.AddJobs(all);
    for (const auto& j : old_leader.Summary().jobs) {
      if (!j.best_effort) last[all[j.id - 1].name] = j.timetable;
    }
  }
  constexpr size_t kRound = 64;
  std::vector<double> round_ms;
  double total_ms = 0;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    state.PauseTiming();
    ms::PlanningAdapter leader(Topology(false), ms::PlanningConfig{});
    leader.Inherit(last, Clock::now() + std::chrono::minutes(1));
    state.ResumeTiming();
    const auto start = Clock::now();
    for (size_t from = 0; from < all.size(); from += kRound) {
      const auto t0 = Clock::now();
      const std::vector<ms::PlanJob> round(
          all.begin() + static_cast<ptrdiff_t>(from),
          all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), from + kRound)));
      (void)leader.AddJobs(round);
      benchmark::DoNotOptimize(leader.Summary());
      round_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    total_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  RoundCounters(state, round_ms);
  state.counters["total_ms"] = total_ms / static_cast<double>(state.iterations());
}

void BmBurstSpread(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  const std::vector<ms::PlanJob> all = Jobs(n, true);
  for (auto _ : state) {
    state.PauseTiming();
    ms::PlanningAdapter adapter(Topology(false), ms::PlanningConfig{});
    state.ResumeTiming();
    (void)adapter.AddJobs(all);
    benchmark::DoNotOptimize(adapter.Summary());
  }
}

// N measured jobs as the registry holds them: 4 nodes of a rack (their NICs' links), and with
// `pairs` one 10 Gbit/s link shared by jobs 2k-1 and 2k, which both fill.
std::vector<ms::JobState> MeasuredJobs(uint64_t n, bool pairs,
                                       std::unordered_map<std::string, double>& capacity) {
  g_racks = n >= 2048 ? 1024 : 64;
  std::vector<ms::JobState> jobs;
  for (uint64_t id = 1; id <= n; ++id) {
    ms::JobState j;
    j.id = id;
    j.name = std::to_string(id);
    j.priority = pairs ? 1 : static_cast<int>((id * 7919) % 3);
    j.world_size = 4;
    const int i = static_cast<int>(id % static_cast<uint64_t>(g_racks * kNodesPerRack / 4));
    for (int r = 0; r < 4; ++r) {
      j.links.push_back(Node(i * 4 + r) + "/up");
      capacity[j.links.back()] = 100e9 / 8;
    }
    if (pairs) {
      j.links.push_back("pair" + std::to_string((id + 1) / 2) + "/up");
      capacity[j.links.back()] = 10e9 / 8;
    }
    j.has_profile = true;
    j.profile.bytes_per_phase = 100'000'000;
    j.profile.compute_ns = 200'000'000;
    j.profile.min_comm_ns = 90'000'000;
    j.profile.comm_ns = 90'000'000;
    j.profile.period_ns = 290'000'000;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

void TurnSets(benchmark::State& state, bool pairs) {
  std::unordered_map<std::string, double> capacity;
  const std::vector<ms::JobState> jobs =
      MeasuredJobs(static_cast<uint64_t>(state.range(0)), pairs, capacity);
  const ms::PlanningConfig config;
  uint64_t partners = 0;
  for (auto _ : state) {
    ms::TwoJobLinks index(capacity, [&](const ms::JobState& j, std::span<const std::string>) {
      return ms::FiguresForTurns(j, pairs ? 10e9 / 8 : 100e9 / 8, config);
    });
    for (const ms::JobState& j : jobs) index.Add(j, j.links);
    partners = 0;
    for (const ms::JobState& j : jobs) partners += index.TurnsFor(j).count;
    benchmark::DoNotOptimize(partners);
  }
  state.counters["partners"] = static_cast<double>(partners);
}

void BmTurnSetsApart(benchmark::State& s) {
  TurnSets(s, false);
}
void BmTurnSetsPairs(benchmark::State& s) {
  TurnSets(s, true);
}

void BmReplaceJobApart(benchmark::State& s) {
  ReplaceJob(s, false, false);
}
void BmReplaceJobSpread(benchmark::State& s) {
  ReplaceJob(s, true, false);
}
void BmSummarySpread(benchmark::State& s) {
  ReplaceJob(s, true, true);
}
void BmReplaceJobOneLink(benchmark::State& s) {
  ReplaceJob(s, false, false, true);
}

}  // namespace

BENCHMARK(BmReplaceJobApart)
    ->Name("BM_ReplaceJob/apart")
    ->Arg(500)
    ->Arg(2048)
    ->Arg(8192)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BmReplaceJobSpread)
    ->Name("BM_ReplaceJob/spread")
    ->Arg(500)
    ->Arg(2048)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BmReplaceJobOneLink)
    ->Name("BM_ReplaceJob/onelink")
    ->Arg(500)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BmSummarySpread)
    ->Name("BM_Summary/spread")
    ->Arg(500)
    ->Arg(8192)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BmBurstSpread)
    ->Name("BM_Burst/spread")
    ->Arg(500)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BmTakeOver)
    ->Name("BM_TakeOver/apart")
    ->Arg(500)
    ->Arg(2048)
    ->Arg(8192)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BmTurnSetsApart)
    ->Name("BM_TurnSets/apart")
    ->Arg(2048)
    ->Arg(8192)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BmTurnSetsPairs)
    ->Name("BM_TurnSets/pairs")
    ->Arg(2048)
    ->Arg(8192)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
