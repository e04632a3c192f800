// metronome-scheduler as a library: the ZeroMQ endpoint for shims, the registry, planning
// through the controller (metronome::controller), the background recalculation, and the HTTP
// server with the status API, metrics and the timeline page.
//
// Service only wires its parts, each of which owns its state, its lock and its threads:
//   - Endpoint (src/endpoint.hpp): the ROUTER socket and its thread; decodes nothing itself,
//     hands every message to the registry and sends what the registry queued;
//   - Registry (src/registry.hpp): clients, jobs, ranks, timetables and the queue of changes,
//     under the registry's lock; the controller's rules run here, on each report;
//   - PlanningWorker (src/planning_worker.hpp): the planners, one per part of the cluster,
//     each under its own lock; the planning threads (take the queued changes, plan each part's
//     share as one round, hand the plan back) and the offline thread (the background
//     recalculation, on a copy, unlocked);
//   - the listener thread (with a plan listener) and httplib's workers read the registry's
//     snapshots.
// The registry never calls out while it holds its lock, and the planning worker releases the
// planners' locks before every call into the registry: no thread holds both.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "metronome/controller/planning.hpp"
#include "metronome/extender/pod.hpp"
#include "metronome/extender/state.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/http_server.hpp"
#include "metronome/service/metrics.hpp"

namespace metronome::service {

using controller::LinkSchedule;
using controller::OfflineResult;
using controller::PlanJob;
using controller::PlanningAdapter;
using controller::PlanSummary;

// What other parts (the kube-scheduler extender) need to know after each plan change: the
// topology as configured and every job with its measured profile and current timetable.
struct ClusterView {
  uint64_t plan_version = 0;
  TopologyConfig topology;
  controller::PlanningConfig planning;
  std::vector<extender::JobSnapshot> jobs;  // nodes: one entry per registered rank
  // The planners', one per planning part, as of plan_version.
  std::vector<std::shared_ptr<const controller::PlanSnapshot>> plan;
};

// What GET /api/v1/timeline answers: the links that carry jobs, each with its jobs' timetables
// and the phases they ran within the span. On a large cluster all of them are megabytes and
// most of a second to build, so by default only the busiest few.
struct TimelineQuery {
  int64_t span_ns = 5'000'000'000;
  size_t max_links = 16;           // the busiest: planned utilization, then the most jobs
  std::vector<std::string> links;  // these instead (unknown names: an error), in this order
};

class Registry;
class PlanningWorker;
class Endpoint;

class Service {
 public:
  // Loads the topology file named in the config and, with http.tls_* set, the certificate and
  // key (throws ConfigError on a bad one).
  explicit Service(ServiceConfig config);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Binds both endpoints and starts the threads. Throws ConfigError (bad keys) or
  // std::runtime_error (cannot bind).
  void Start();
  // A standby replica (leader election, leadership.hpp): serves HTTP only. /healthz answers,
  // /readyz is 503 (a Kubernetes Service then sends the shims to the leader alone), the shims'
  // endpoint is not bound and nothing plans. Start() later makes it the leader.
  void StartStandby();
  void Stop();
  // Whether Start() ran: this replica plans and serves the shims.
  bool Leading() const { return leading_.load(); }

  // The jobs the previous leader planned (by name; timetables at the configured epoch), read by
  // a new leader before Start(): a job of one of these names that registers within `for_ms` is
  // planned where it ran, unless moving pays (controller's PlanningAdapter::Inherit).
  void InheritPlan(const std::map<std::string, Timetable>& timetables, int64_t for_ms);

  std::string ZmqEndpoint() const;  // resolved (wildcard ports)
  int HttpPort() const { return http_->Port(); }
  HttpServer& Http() { return *http_; }
  Metrics& GetMetrics() { return metrics_; }
  const ServiceConfig& Config() const { return config_; }

  // Called (on a thread of its own, without any lock) once at start and after plan changes;
  // changes that come while it runs are coalesced into one call with the latest view. Set it
  // before Start().
  void SetPlanListener(std::function<void(const ClusterView&)> listener) {
    plan_listener_ = std::move(listener);
  }
  ClusterView View();

  // The Kubernetes integration's check of a shim's identity (src/pod_identity.hpp): once enabled
  // (before Start()), a hello registers only when it names a pod of the set given last, on the
  // pod's node and for the pod's job, and the job's priority is the pod's. Pods by
  // "namespace/name"; until the first SetPods every hello is refused.
  void EnablePodCheck();
  void SetPods(std::map<std::string, extender::PodInfo> pods);

  // Snapshots for the status API (thread-safe).
  nlohmann::json StatusJson();
  // A page of the jobs: at most `limit`, in name order, after the job named `after` ("": from
  // the first); {"jobs", "total", "continue"} ("continue": the name to ask after, while more
  // remain).
  nlohmann::json JobsJson(size_t limit, const std::string& after);
  std::optional<nlohmann::json> JobJson(const std::string& name);
  std::optional<nlohmann::json> TimetableJson(const std::string& name);
  std::optional<nlohmann::json> PhasesJson(const std::string& name, size_t limit);
  // At most `limit` links in the plan's order after the one named `after` ("": the first);
  // {"links", "total", "continue"} as JobsJson; nullopt when no link is named `after`.
  std::optional<nlohmann::json> LinksJson(size_t limit, const std::string& after);
  nlohmann::json AllLinksJson();  // every link: {"links", "total"}
  // Throws HttpError (404 unknown_link) for a link the plan does not have.
  nlohmann::json TimelineJson(const TimelineQuery& query);
  // Throws HttpError on a bad request.
  nlohmann::json WhatIfJson(const nlohmann::json& request);

 private:
  void ListenerLoop();
  void NotifyPlanListener();

  ServiceConfig config_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<PlanningWorker> worker_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Endpoint> endpoint_;
  int registry_metrics_ = -1;  // the registry's collector in metrics_
  std::atomic<bool> stopping_{false};
  std::atomic<bool> leading_{false};
  bool http_started_ = false;
  int64_t started_ns_ = 0;
  std::function<void(const ClusterView&)> plan_listener_;
  uint64_t notified_version_ = UINT64_MAX;
  std::thread listener_thread_;
};

}  // namespace metronome::service
