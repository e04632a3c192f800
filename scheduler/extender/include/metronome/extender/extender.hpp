// The kube-scheduler extender (docs/kubernetes.md, "How the extender decides"): the filter and
// prioritize verbs of the `kubescheduler.config.k8s.io/v1` extender API, with JSON keys as
// kube-scheduler's Go types name them:
//   request  ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList | null,
//                                   "NodeNames": [string] | null}
//   filter   ExtenderFilterResult  {"Nodes", "NodeNames", "FailedNodes": {node: reason},
//                                   "FailedAndUnresolvableNodes": {}, "Error": ""}
//   priority HostPriorityList      [{"Host": node, "Score": 0..10}]
// With `nodeCacheCapable: false` kube-scheduler sends full Node objects (and gets them back);
// with `true` only names, and node labels come from ClusterState::node_labels.
//
// How it decides (docs/kubernetes.md, "How the extender decides"): for the pod's job, each
// candidate node is joined to the nodes its other pods already hold, and the planner's what-if
// (metronome::planner::what_if, against the current plan) predicts the job's own slowdown and
// the priority-weighted slowdown it adds to the jobs on the links it would cross. prioritize
// turns that cost into 0–10; filter removes a node only when the job would run unscheduled
// (best-effort) over a link where it contends with a gated job of higher priority.
//
// This is a library with no server of its own: metronome-scheduler feeds it UpdateState() and
// calls HandleFilter/HandlePrioritize from its HTTP routes (or RegisterRoutes below). Handlers
// are thread-safe and never throw; malformed requests get HTTP 400 with a JSON error.
#pragma once

#include <httplib.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "metronome/extender/pod.hpp"
#include "metronome/extender/state.hpp"

namespace metronome::models {
class ModelTable;
}

namespace metronome::extender {

struct ExtenderConfig {
  // Node labels that name a node's rack, first match wins.
  std::vector<std::string> rack_labels = {"metronome.dev/rack", "topology.kubernetes.io/zone"};
  // Node labels that name its GPU type (matched against the model table's GPU keys, e.g.
  // "NVIDIA-A100-SXM4-80GB" → A100).
  std::vector<std::string> gpu_labels = {"metronome.dev/gpu-type", "nvidia.com/gpu.product"};
  std::string default_gpu = "A100";
  // Capacities of links learned from labels (bytes/s): a node's NIC and a rack's uplink.
  double default_nic_bytes_per_s = 100e9 / 8;
  double default_rack_uplink_bytes_per_s = 100e9 / 8;
  PriorityMapping priority;
  // Score = round(10 · max(0, 1 − cost / cost_at_zero)), cost = own slowdown + neighbours'
  // priority-weighted slowdown / own weight + load_weight · mean planned load of crossed links.
  double cost_at_zero = 1.0;
  double load_weight = 0.1;
  // When every candidate would break a higher-priority timetable, pass them all (the job then
  // runs best-effort, as the planner never starves a job) instead of leaving the pod pending.
  bool never_starve = true;
};

// A reply: HTTP status and JSON body.
struct ExtenderResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Handling time of one verb in fixed buckets (seconds), as metronome-scheduler's /metrics
// exports it (a Prometheus histogram).
struct LatencyHistogram {
  static constexpr std::array<double, 14> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0};
  // Calls per bucket, not cumulative: counts[i] took at most kBounds[i] (and more than the bound
  // before); the last entry took more than kBounds.back().
  std::array<uint64_t, kBounds.size() + 1> counts{};
  uint64_t count = 0;  // the sum of counts
  double sum_seconds = 0.0;
};

// Counters for /metrics (monotonic, except the gauges marked so).
struct ExtenderStats {
  uint64_t filter_requests = 0;  // every call, malformed ones included
  uint64_t prioritize_requests = 0;
  uint64_t bad_requests = 0;  // answered 400 (both verbs: the sum of the next two)
  uint64_t filter_bad_requests = 0;
  uint64_t prioritize_bad_requests = 0;
  uint64_t internal_errors = 0;       // a handler failed inside (answered with an Error); a bug
  uint64_t nodes_filtered_out = 0;    // FailedNodes entries
  uint64_t never_starve_passes = 0;   // filters where every node failed and all were passed
  uint64_t pods_without_job = 0;      // no job label: neutral answers
  uint64_t pods_without_profile = 0;  // job known but no profile: neutral answers
  uint64_t planner_refusals = 0;      // the planner refused the pod's job: no opinion on some
  uint64_t bad_annotations = 0;       // calls whose pod has metronome.dev annotations unread
  uint64_t snapshot_rebuilds = 0;
  uint64_t reused_decisions = 0;    // prioritize answered from the same pod's filter
  uint64_t state_version = 0;       // gauge: ClusterState::version in use
  uint64_t last_latency_us = 0;     // gauge: the last request's handling time
  LatencyHistogram filter_latency;  // handling time of each call, malformed ones included
  LatencyHistogram prioritize_latency;
};

class Extender {
 public:
  // `models` may be null: then the table is loaded from its default path (models.yaml); if that
  // fails, model annotations are ignored (counted as pods without profile).
  explicit Extender(ExtenderConfig config = {},
                    std::shared_ptr<const models::ModelTable> models = nullptr);
  ~Extender();
  Extender(const Extender&) = delete;
  Extender& operator=(const Extender&) = delete;

  // Replaces the cluster state (cheap to call on every plan change: the planner snapshot is
  // built here, once, not per request).
  void UpdateState(ClusterState state);
  // Replaces only the node labels (the kube client's Node watch), keeping the rest.
  void UpdateNodeLabels(std::map<std::string, NodeLabels> labels);

  ExtenderResponse HandleFilter(std::string_view body);
  ExtenderResponse HandlePrioritize(std::string_view body);

  ExtenderStats Stats() const;
  const ExtenderConfig& Config() const { return config_; }

  struct Snapshot;        // the planner built from the state (snapshot.cpp)
  struct Decisions;       // filter's verdicts, reused by the prioritize call for the same pod
  class LatencyRecorder;  // lock-free LatencyHistogram

 private:
  std::shared_ptr<const Snapshot> Current();
  std::shared_ptr<const Snapshot> Learn(const std::map<std::string, NodeLabels>& nodes);

  ExtenderConfig config_;
  std::shared_ptr<const models::ModelTable> models_;
  std::mutex update_mu_;   // serializes snapshot builds (taken before mu_)
  mutable std::mutex mu_;  // guards state_, learned_ and snapshot_
  ClusterState state_;
  std::map<std::string, NodeLabels> learned_;  // nodes first seen in requests
  std::shared_ptr<const Snapshot> snapshot_;
  static constexpr size_t kMaxLearnedNodes = 100'000;
  std::unique_ptr<Decisions> decisions_;

  std::unique_ptr<LatencyRecorder> filter_latency_, prioritize_latency_;

  std::atomic<uint64_t> filter_requests_{0}, prioritize_requests_{0}, filter_bad_requests_{0},
      prioritize_bad_requests_{0}, internal_errors_{0}, nodes_filtered_out_{0},
      never_starve_passes_{0}, pods_without_job_{0}, pods_without_profile_{0}, planner_refusals_{0},
      bad_annotations_{0}, snapshot_rebuilds_{0}, reused_decisions_{0}, last_latency_us_{0};
  // The pod whose annotations were last logged as unread (kube-scheduler asks about a pod
  // again and again: logged once in a row).
  std::atomic<size_t> last_warned_pod_{0};
  // Counts what the evaluation of one call could not do.
  void CountShortfall(bool no_job, bool no_profile, bool refused);
  // Counts a call whose pod has annotations it could not read (`warnings`: what and why), and
  // logs them once for each pod in a row.
  void CountUnreadAnnotations(const PodInfo& pod, size_t pod_hash, const std::string& warnings);
};

// Mounts POST <prefix>/filter and POST <prefix>/prioritize on an httplib server.
void RegisterRoutes(httplib::Server& server, Extender& extender,
                    const std::string& prefix = "/extender");

// The same on any server with `Post(name, pattern, handler(const httplib::Request&,
// httplib::Response&))`, such as metronome-scheduler's HttpServer (routes named
// "extender_filter" and "extender_prioritize" for its metrics).
template <typename NamedRouteServer>
void RegisterNamedRoutes(NamedRouteServer& server, Extender& extender,
                         const std::string& prefix = "/extender") {
  const auto reply = [](httplib::Response& res, const ExtenderResponse& r) {
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  };
  server.Post("extender_filter", prefix + "/filter",
              [&extender, reply](const httplib::Request& req, httplib::Response& res) {
                reply(res, extender.HandleFilter(req.body));
              });
  server.Post("extender_prioritize", prefix + "/prioritize",
              [&extender, reply](const httplib::Request& req, httplib::Response& res) {
                reply(res, extender.HandlePrioritize(req.body));
              });
}

}  // namespace metronome::extender
