// metronome-sim's run time against cluster size: a generated two-tier cluster (racks of 8
// nodes with 8 GPUs, 100 Gbit/s NICs, 400 Gbit/s rack uplinks) with 2.3 jobs per node (4-48
// GPUs, 100 iterations each, Poisson arrivals), simulated under k8s-default (fluid engine
// only) and metronome (fluid engine + planner). Benchmark names carry the node count; the
// counters give the events simulated and the events per second.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "metronome/sim/scenario.hpp"
#include "metronome/sim/simulator.hpp"

namespace {

using metronome::sim::JobSpec;
using metronome::sim::NodeSpec;
using metronome::sim::RackSpec;
using metronome::sim::Scenario;

Scenario MakeCluster(int nodes) {
  Scenario s;
  s.seed = 7;
  s.noise.compute_jitter = 0.02;
  s.noise.clock_skew_us = 50;
  const int racks = std::max(1, nodes / 8);
  for (int r = 0; r < racks; ++r) {
    RackSpec rack;
    rack.name = std::string("r").append(std::to_string(r));
    rack.uplink_gbps = 400;
    for (int n = 0; n < 8; ++n) {
      NodeSpec node;
      node.name = rack.name;
      node.name.append("n").append(std::to_string(n));
      node.gpus = 8;
      node.gpu = "A100";
      node.nic_gbps = 100;
      rack.nodes.push_back(node);
    }
    s.racks.push_back(rack);
  }
  std::mt19937_64 rng(42);
  const int sizes[] = {4, 6, 8, 12, 16, 24, 32, 48};
  std::exponential_distribution<double> gap(2.0 * racks / 64.0);
  std::uniform_real_distribution<double> compute(30, 300);
  std::uniform_real_distribution<double> grad(10, 600);
  double t = 0;
  const int jobs = nodes * 23 / 10;
  for (int i = 0; i < jobs; ++i) {
    JobSpec j;
    j.name = std::string("job").append(std::to_string(i));
    j.compute_ms = compute(rng);
    j.gradient_mb = grad(rng);
    j.gpus = sizes[rng() % 8];
    j.gpus_per_pod = 4;
    j.iterations = 100;
    j.priority = static_cast<int>(rng() % 4);
    j.arrival_s = t;
    t += gap(rng);
    s.jobs.push_back(j);
  }
  return s;
}

void Run(benchmark::State& state, const char* policy) {
  const Scenario s = MakeCluster(static_cast<int>(state.range(0)));
  const auto p = metronome::sim::PolicyByName(policy);
  double events = 0;
  for (auto _ : state) {
    const auto r = metronome::sim::Simulate(s, p);
    events = static_cast<double>(r.summary.events);
    benchmark::DoNotOptimize(r.summary.avg_jct_s);
  }
  state.counters["jobs"] = static_cast<double>(s.jobs.size());
  state.counters["events"] = events;
  state.counters["events_per_s"] = benchmark::Counter(
      events * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BmK8sDefault(benchmark::State& state) {
  Run(state, "k8s-default");
}
void BmMetronome(benchmark::State& state) {
  Run(state, "metronome");
}

BENCHMARK(BmK8sDefault)->Arg(64)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BmMetronome)->Arg(64)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
