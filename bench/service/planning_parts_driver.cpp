// planning_parts_driver: does a long planning round in one part of the cluster hold up the
// pushes of the rest? Prints a table; not a test.
//
// The scheduler's registry and planning worker run in this process, without sockets (messages
// in through Registry::Handle, pushes out of Registry::TakeOutbox), on a two-tier cluster of
// `--racks` racks of 8 nodes. Background jobs fill racks from rack 2 on (two nodes each, in one
// rack). Then a burst of `--burst` jobs joins at once across racks 0 and 1, all on their two
// uplinks: one long round for the part that plans them. Right after it, probe jobs join one at a
// time, 2 ms after the one before was pushed, until the burst's jobs are all pushed: by turns
// on a node pair of their own (a new part of the cluster) and on the nodes of a background job
// (so in that job's planning part, which may be the burst's). Each probe's time from its report
// to its push is what the burst's round costs the rest of the cluster. Run for each `--parts`
// (controller.planning_parts; `--threads` is controller.planning_threads), `--repeat` times,
// alternating.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"
#include "planning_worker.hpp"
#include "registry.hpp"

namespace ms = metronome::service;
namespace proto = metronome::proto;
using Clock = std::chrono::steady_clock;
constexpr auto kProbeGap = std::chrono::milliseconds(2);  // between one probe's push and the next

namespace {

struct Options {
  uint32_t racks = 1024;
  uint32_t background = 2000;
  uint32_t burst = 300;
  std::vector<uint32_t> parts{1, 8};
  uint32_t threads = 2;
  int repeat = 2;
};

struct Result {
  double burst_ms = 0.0;  // from the burst's last report to its last job's push
  // Probes that joined while the burst was being planned: on nodes of their own, and beside a
  // background job.
  std::vector<double> apart_ms, beside_ms;
};

class InProcess {
 public:
  InProcess(const Options& o, uint32_t parts) {
    cfg_.controller.offline_interval_ms = 0;
    cfg_.controller.planning_parts = parts;
    cfg_.controller.planning_threads = o.threads;
    cfg_.topology.unknown_nodes_link.clear();
    cfg_.topology.two_tier =
        metronome::controller::TopologyConfig::TwoTier{o.racks, 8, 1.25e9, 3.125e9};
    worker_ = std::make_unique<ms::PlanningWorker>(cfg_, metrics_);
    registry_ = std::make_unique<ms::Registry>(
        cfg_, metrics_, [this](const ms::PlanJob& j) { return worker_->JobLinks(j); },
        worker_->InitialPlan());
    worker_->Start(*registry_, nullptr);
  }
  ~InProcess() {
    registry_->Stop();
    worker_->Stop();
  }

  // Registers a two-rank job and reports its profile (period and comm in ms).
  void Join(const std::string& job, const std::string& n0, const std::string& n1, int64_t period,
            int64_t comm) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      proto::Hello h;
      h.job_id = job;
      h.rank = rank;
      h.world_size = 2;
      h.node = rank == 0 ? n0 : n1;
      Send(job + "/" + std::to_string(rank), h);
    }
    proto::ProfileReport r;
    r.job_id = job;
    r.period_ns = period * 1'000'000;
    r.comm_ns = comm * 1'000'000;
    r.confidence = 1.0;
    Send(job + "/0", r);
  }

  // Collects the pushes queued so far; true once every job in `jobs` had one.
  bool Pushed(const std::set<std::string>& jobs) {
    for (const ms::Outgoing& o : registry_->TakeOutbox()) {
      const proto::Decoded d = proto::Decode(o.payload);
      if (!d.Ok() || !std::holds_alternative<proto::TimetablePush>(d.message)) continue;
      pushed_.insert(o.identity.substr(0, o.identity.find('/')));
    }
    return std::all_of(jobs.begin(), jobs.end(),
                       [&](const auto& j) { return pushed_.contains(j); });
  }
  bool WaitPushed(const std::set<std::string>& jobs, double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (!Pushed(jobs)) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

 private:
  template <typename M>
  void Send(const std::string& identity, const M& m) {
    registry_->Handle({identity, proto::Encode(proto::Message{m})}, metronome::RealtimeNs());
  }

  ms::ServiceConfig cfg_;
  ms::Metrics metrics_;
  std::unique_ptr<ms::PlanningWorker> worker_;
  std::unique_ptr<ms::Registry> registry_;
  std::set<std::string> pushed_;
};

std::string Node(uint32_t rack, uint32_t n) {
  return "r" + std::to_string(rack) + "n" + std::to_string(n);
}

Result RunOnce(const Options& o, uint32_t parts) {
  InProcess s(o, parts);
  std::set<std::string> background;
  for (uint32_t i = 0; i < o.background; ++i) {
    const uint32_t rack = 2 + i / 4;
    const uint32_t pair = i % 4;
    const std::string name = "bg" + std::to_string(i);
    s.Join(name, Node(rack, 2 * pair), Node(rack, 2 * pair + 1), 200 + 7 * (i % 13), 40);
    background.insert(name);
  }
  if (!s.WaitPushed(background, 120)) throw std::runtime_error("background not planned in 120 s");

  std::set<std::string> burst;
  for (uint32_t i = 0; i < o.burst; ++i) {
    const std::string name = "burst" + std::to_string(i);
    s.Join(name, Node(0, i % 8), Node(1, (i / 8) % 8), 300 + 11 * (i % 17), 10 + i % 20);
    burst.insert(name);
  }
  const auto t_burst = Clock::now();
  Result r;
  const uint32_t probe_pairs = (o.racks - 2 - (o.background + 3) / 4) * 4;
  for (uint32_t probe = 0; !s.Pushed(burst); ++probe) {
    if (Clock::now() - t_burst > std::chrono::seconds(120)) {
      throw std::runtime_error("burst not planned in 120 s");
    }
    const bool apart = probe % 2 == 0;
    std::string n0, n1;
    if (apart) {
      const uint32_t k = probe / 2;
      if (k >= probe_pairs) throw std::runtime_error("out of probe racks");
      const uint32_t rack = o.racks - 1 - k / 4;
      n0 = Node(rack, 2 * (k % 4));
      n1 = Node(rack, 2 * (k % 4) + 1);
    } else {  // beside background job i (bg i runs on rack 2 + i / 4, pair i % 4)
      const uint32_t i = (probe / 2 * 97) % o.background;
      n0 = Node(2 + i / 4, 2 * (i % 4));
      n1 = Node(2 + i / 4, 2 * (i % 4) + 1);
    }
    const std::string name = "probe" + std::to_string(probe);
    const auto t0 = Clock::now();
    s.Join(name, n0, n1, 250, 30);
    if (!s.WaitPushed({name}, 120)) throw std::runtime_error("probe not planned in 120 s");
    (apart ? r.apart_ms : r.beside_ms)
        .push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    std::this_thread::sleep_for(kProbeGap);
  }
  r.burst_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_burst).count();
  return r;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))];
}

int Run(int argc, char** argv) {
  Options o;
  CLI::App app{"planning_parts_driver: a long round in one part against the pushes of the rest"};
  app.add_option("--racks", o.racks, "racks of 8 nodes")->check(CLI::Range(64u, 4096u));
  app.add_option("--background", o.background, "jobs inside one rack each, from rack 2 on");
  app.add_option("--burst", o.burst, "jobs joining at once across racks 0 and 1");
  app.add_option("--parts", o.parts, "controller.planning_parts values to compare")->delimiter(',');
  app.add_option("--threads", o.threads, "controller.planning_threads");
  app.add_option("--repeat", o.repeat, "runs of each, alternating");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  if (2 + (o.background + 3) / 4 + 64 > o.racks) {
    std::fprintf(stderr, "too few racks for the background and the probes\n");
    return 2;
  }
  std::printf(
      "%u racks x 8 nodes, %u background jobs, a burst of %u jobs on racks 0-1, %u planning "
      "threads\n",
      o.racks, o.background, o.burst, o.threads);
  std::printf("%-6s %-4s %11s | %-33s | %-33s\n", "parts", "run", "burst (ms)",
              "probes apart: n, p50, max (ms)", "probes beside a job: n, p50, max, > 20 ms");
  const auto max_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  for (int run = 0; run < o.repeat; ++run) {
    for (const uint32_t parts : o.parts) {
      const Result r = RunOnce(o, parts);
      const auto slow = std::count_if(r.beside_ms.begin(), r.beside_ms.end(),
                                      [](double ms) { return ms > 20.0; });
      std::printf("%-6u %-4d %11.1f | %4zu %9.2f %9.2f          | %4zu %9.2f %9.2f %6td\n", parts,
                  run + 1, r.burst_ms, r.apart_ms.size(), Percentile(r.apart_ms, 0.5),
                  max_of(r.apart_ms), r.beside_ms.size(), Percentile(r.beside_ms, 0.5),
                  max_of(r.beside_ms), slow);
      std::fflush(stdout);
    }
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "planning_parts_driver: %s\n", e.what());
    return 1;
  }
}
