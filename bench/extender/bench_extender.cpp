// Latency of one scheduling decision through the extender: filter then prioritize for one pod
// against 1,000 candidate nodes (50 racks × 20 nodes, rack from node labels) with 100 running
// jobs (4 pods each, mixed priorities and profiles; duty cycles 0.1–0.45, or 400 rack-spanning jobs
// with duty cycles 0.6–0.9 in the _Busy variants) in the plan. Two request forms:
//   NodeNames — nodeCacheCapable: true (names only; labels from the node cache), and
//   FullNodes — nodeCacheCapable: false (every Node object in full, ~3 KB each, as sent).
// Reported: p50 and p99 of filter+prioritize per decision (target p99 ≤ 10 ms), and the body
// size, and the same quantiles of the thread's CPU time (free of preemption by other
// processes on a shared machine). Run: build/k8s/bench/extender/bench_extender
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>
#include <vector>

#include "metronome/extender/extender.hpp"

namespace {

using metronome::extender::ClusterState;
using metronome::extender::Extender;
using metronome::extender::JobSnapshot;
using Json = nlohmann::json;

constexpr int kRacks = 50;
constexpr int kNodesPerRack = 20;
constexpr int kJobs = 100;

std::string NodeName(int i) {
  return "gpu-" + std::to_string(i / kNodesPerRack) + "-" + std::to_string(i % kNodesPerRack);
}

Json NodeObject(int i) {
  const std::string name = NodeName(i);
  Json images = Json::array();
  for (int k = 0; k < 4; ++k) {
    images.push_back({{"names",
                       {"registry.example.com/team/image-" + std::to_string(k) +
                            "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef",
                        "registry.example.com/team/image-" + std::to_string(k) + ":v1"}},
                      {"sizeBytes", 1234567890}});
  }
  return {
      {"kind", "Node"},
      {"apiVersion", "v1"},
      {"metadata",
       {{"name", name},
        {"uid", "uid-" + name},
        {"resourceVersion", "123456"},
        {"labels",
         {{"kubernetes.io/hostname", name},
          {"kubernetes.io/arch", "amd64"},
          {"kubernetes.io/os", "linux"},
          {"topology.kubernetes.io/zone", "rack-" + std::to_string(i / kNodesPerRack)},
          {"nvidia.com/gpu.product", i % 3 == 0 ? "Tesla-V100-SXM2-32GB" : "NVIDIA-A100-SXM4-80GB"},
          {"nvidia.com/gpu.count", "8"}}},
        {"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}}}},
      {"spec",
       {{"podCIDR", "10.244.0.0/24"},
        {"taints", {{{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}}}}},
      {"status",
       {{"capacity",
         {{"cpu", "96"}, {"memory", "1176379472Ki"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
        {"allocatable",
         {{"cpu", "95500m"}, {"memory", "1175228496Ki"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
        {"conditions",
         {{{"type", "Ready"},
           {"status", "True"},
           {"lastHeartbeatTime", "2026-11-29T12:01:10Z"},
           {"reason", "KubeletReady"},
           {"message", "kubelet is posting ready status"}}}},
        {"addresses",
         {{{"type", "InternalIP"}, {"address", "10.0.0.1"}},
          {{"type", "Hostname"}, {"address", name}}}},
        {"nodeInfo",
         {{"kubeletVersion", "v1.31.2"},
          {"osImage", "Debian GNU/Linux 12"},
          {"containerRuntimeVersion", "containerd://1.7.22"}}},
        {"images", images}}}};
}

ClusterState State(bool with_labels, bool busy) {
  ClusterState s;
  s.version = 1;
  s.network.unknown_nodes_link = "";
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> node(0, kRacks * kNodesPerRack - 1);
  std::uniform_int_distribution<int> prio(0, 2);
  std::uniform_int_distribution<int> period_ms(150, 600);
  std::uniform_real_distribution<double> duty(busy ? 0.6 : 0.1, busy ? 0.9 : 0.45);
  const int jobs = busy ? 4 * kJobs : kJobs;
  for (int j = 0; j < jobs; ++j) {
    JobSnapshot job;
    job.name = "job-" + std::to_string(j);
    job.priority = prio(rng);
    const int base = node(rng);
    // Mostly rack-local jobs, every fifth spread over two racks.
    for (int k = 0; k < 4; ++k) {
      const int n = j % 5 == 0
                        ? (base + k * kNodesPerRack) % (kRacks * kNodesPerRack)
                        : (base / kNodesPerRack) * kNodesPerRack + (base + k) % kNodesPerRack;
      job.nodes.push_back(NodeName(n));
    }
    job.profile.period_ns = period_ms(rng) * 1'000'000LL;
    job.profile.comm_ns =
        static_cast<int64_t>(static_cast<double>(job.profile.period_ns) * duty(rng));
    s.jobs.push_back(job);
  }
  if (with_labels) {
    for (int i = 0; i < kRacks * kNodesPerRack; ++i) {
      s.node_labels[NodeName(i)] = {
          {"topology.kubernetes.io/zone", "rack-" + std::to_string(i / kNodesPerRack)}};
    }
  }
  s.placed_pods["new-job"] = {NodeName(7), NodeName(8), NodeName(9)};
  return s;
}

Json Pod() {
  return {{"kind", "Pod"},
          {"apiVersion", "v1"},
          {"metadata",
           {{"name", "new-job-worker-3"},
            {"namespace", "default"},
            {"labels", {{"training.kubeflow.org/job-name", "new-job"}}},
            {"annotations",
             {{"metronome.dev/model", "bert"},
              {"metronome.dev/priority", "normal"},
              {"metronome.dev/ranks", "4"}}}}},
          {"spec",
           {{"schedulerName", "metronome"},
            {"priority", 0},
            {"containers",
             {{{"name", "pytorch"},
               {"image", "pytorch/pytorch:2.5.1"},
               {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Wall-clock quantiles include preemption by whatever else runs on the machine; the thread's
// CPU-time quantiles are what one decision costs.
void Report(benchmark::State& state, const std::vector<double>& ms,
            const std::vector<double>& cpu_ms, size_t body_bytes) {
  state.counters["p50_ms"] = Quantile(ms, 0.50);
  state.counters["p99_ms"] = Quantile(ms, 0.99);
  state.counters["cpu_p50_ms"] = Quantile(cpu_ms, 0.50);
  state.counters["cpu_p99_ms"] = Quantile(cpu_ms, 0.99);
  state.counters["body_KiB"] = static_cast<double>(body_bytes) / 1024.0;
}

void Run(benchmark::State& state, bool full_nodes, bool busy) {
  Extender ext;
  ext.UpdateState(State(!full_nodes, busy));
  Json args = {{"Pod", Pod()}, {"Nodes", nullptr}, {"NodeNames", nullptr}};
  if (full_nodes) {
    Json items = Json::array();
    for (int i = 0; i < kRacks * kNodesPerRack; ++i) items.push_back(NodeObject(i));
    args["Nodes"] = {{"metadata", Json::object()}, {"items", items}};
  } else {
    Json names = Json::array();
    for (int i = 0; i < kRacks * kNodesPerRack; ++i) names.push_back(NodeName(i));
    args["NodeNames"] = names;
  }
  const std::string body = args.dump();
  // The first request teaches the extender the nodes it had not seen (once per node).
  benchmark::DoNotOptimize(ext.HandleFilter(body));
  std::vector<double> ms;
  std::vector<double> cpu_ms;
  for (auto _ : state) {
    const double c0 = ThreadCpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    auto f = ext.HandleFilter(body);
    auto p = ext.HandlePrioritize(body);
    const auto t1 = std::chrono::steady_clock::now();
    cpu_ms.push_back(ThreadCpuMs() - c0);
    benchmark::DoNotOptimize(f);
    benchmark::DoNotOptimize(p);
    if (f.status != 200 || p.status != 200) state.SkipWithError("extender answered an error");
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  Report(state, ms, cpu_ms, body.size());
  const auto stats = ext.Stats();
  state.counters["filtered_out"] =
      static_cast<double>(stats.nodes_filtered_out) / static_cast<double>(stats.filter_requests);
  state.counters["reused"] = static_cast<double>(stats.reused_decisions);
  state.counters["no_profile"] = static_cast<double>(stats.pods_without_profile);
  // The spread of the answer: mean score over the candidates.
  const Json scores = Json::parse(ext.HandlePrioritize(body).body);
  double sum = 0;
  for (const Json& e : scores) sum += e["Score"].get<double>();
  state.counters["mean_score"] = sum / static_cast<double>(scores.size());
}

void BmFilterPrioritize1000NodeNames(benchmark::State& state) {
  Run(state, false, false);
}
void BmFilterPrioritize1000FullNodes(benchmark::State& state) {
  Run(state, true, false);
}
// Busy links (400 jobs spread over four racks each, duty cycles 0.6-0.9): many candidates get
// no window, so the what-if takes its
// contention path and filter writes FailedNodes reasons.
void BmFilterPrioritize1000NodeNamesBusy(benchmark::State& state) {
  Run(state, false, true);
}
void BmFilterPrioritize1000FullNodesBusy(benchmark::State& state) {
  Run(state, true, true);
}

BENCHMARK(BmFilterPrioritize1000NodeNames)->Unit(benchmark::kMillisecond)->Iterations(300);
BENCHMARK(BmFilterPrioritize1000FullNodes)->Unit(benchmark::kMillisecond)->Iterations(100);
BENCHMARK(BmFilterPrioritize1000NodeNamesBusy)->Unit(benchmark::kMillisecond)->Iterations(300);
BENCHMARK(BmFilterPrioritize1000FullNodesBusy)->Unit(benchmark::kMillisecond)->Iterations(100);

}  // namespace

BENCHMARK_MAIN();
