// metronome-scheduler as a library: the ZeroMQ endpoint for shims, the registry, planning
// through the planner adapter, the controller, the background recalculation, and the HTTP
// server with the status API, metrics and the timeline page.
//
// Threads and locks:
//   - the endpoint thread owns the ROUTER socket: it decodes messages, updates the registry,
//     queues joins, leaves and re-plans for the planning thread, sends pongs, welcomes, errors
//     and timetable pushes, and every tick drops silent ranks. It never runs the planner, so a
//     long re-plan delays neither clock pongs nor registrations;
//   - the planning thread takes every queued change at once (a burst of joins costs one planner
//     call), plans without the registry lock, then turns the plan into timetable pushes under it
//     and wakes the endpoint thread to send them; it also adopts the offline search's results;
//   - the listener thread (with a plan listener) calls it after plan changes, coalesced;
//   - httplib's worker threads serve HTTP, reading the registry under the same lock;
//   - the offline thread runs the planner's recalculation on a copy of the problem, unlocked.
// mu_ guards the registry, plan_mu_ the planner; no thread holds both at once.
#pragma once

#include <spdlog/common.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "metronome/common/protocol.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/extender/state.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/http_server.hpp"
#include "metronome/service/metrics.hpp"
#include "metronome/service/state.hpp"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

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
  std::vector<extender::JobSnapshot> jobs;  // nodes: one entry per registered rank
};

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
  void Stop();

  std::string zmq_endpoint() const { return bound_endpoint_; }  // resolved (wildcard ports)
  int http_port() const { return http_->port(); }
  HttpServer& http() { return *http_; }
  Metrics& metrics() { return metrics_; }
  const ServiceConfig& config() const { return config_; }

  // Called (on a thread of its own, without the service lock) once at start and after plan
  // changes; changes that come while it runs are coalesced into one call with the latest view.
  // Set it before Start().
  void SetPlanListener(std::function<void(const ClusterView&)> listener) {
    plan_listener_ = std::move(listener);
  }
  ClusterView View();

  // Snapshots for the status API (thread-safe).
  nlohmann::json StatusJson();
  nlohmann::json JobsJson();
  std::optional<nlohmann::json> JobJson(const std::string& name);
  std::optional<nlohmann::json> TimetableJson(const std::string& name);
  std::optional<nlohmann::json> PhasesJson(const std::string& name, size_t limit);
  nlohmann::json LinksJson();
  nlohmann::json TimelineJson(int64_t span_ns);
  // Throws HttpError on a bad request.
  nlohmann::json WhatIfJson(const nlohmann::json& request);
  void RefreshGauges();

 private:
  struct Outgoing {
    std::string identity;
    std::string payload;
    const char* type;
  };
  struct Pending {
    enum Kind { kJoin, kLeave, kReplan } kind;
    uint64_t id;
    std::string reason;
    int64_t trigger_ns;
  };

  void EndpointLoop();
  void PlanningLoop();
  void ListenerLoop();
  void OfflineLoop(std::stop_token stop);
  void WakeEndpoint();
  void HandleFrames(std::vector<std::string>& frames, int64_t t_recv);
  void HandleHello(ClientState& client, const proto::Hello& m, int64_t now);
  void HandleReport(ClientState& client, const proto::ProfileReport& m, int64_t now);
  void HandleBye(ClientState& client, const proto::Bye& m, int64_t now);
  void Reject(ClientState* client, const std::string& identity, proto::ErrorCode code,
              const std::string& reason, const std::string& message);
  void Queue(const std::string& identity, const proto::Message& m);
  void PushTimetable(JobState& job, RankState& rank, const char* reason, int64_t now);
  void RemoveJob(const std::string& name, const char* reason);
  bool AdoptOffline(const OfflineResult& result);
  void ApplyPlan(const PlanSummary& plan, int64_t trigger_ns, const char* reason);
  void Tick(int64_t now);
  void FlushOutbox();
  void NotifyPlanListener();
  PlanJob ToPlanJob(const JobState& job) const;
  void Decide(JobState& job, const char* decision, const std::string& detail);
  void Decide(JobState& job, const char* decision, spdlog::level::level_enum level,
              const std::string& detail);
  double MeasuredUtilization(const std::string& link) const;

  ServiceConfig config_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string bound_endpoint_;
  std::atomic<bool> stopping_{false};
  std::thread endpoint_thread_;
  std::thread planning_thread_;
  std::condition_variable plan_cv_;  // with mu_: pending_ or offline_result_ has work
  std::thread listener_thread_;
  std::condition_variable listener_cv_;  // with mu_: plan_version_ moved past notified_version_
  int wake_fd_ = -1;                     // eventfd: the planning thread has pushes to send
  std::jthread offline_thread_;
  std::condition_variable_any offline_cv_;
  int64_t started_ns_ = 0;
  std::function<void(const ClusterView&)> plan_listener_;
  uint64_t notified_version_ = UINT64_MAX;

  // The planner's state: guarded by plan_mu_. Its topology queries (JobLinks, LinkNames) read
  // only the immutable topology and need no lock.
  std::mutex plan_mu_;
  PlanningAdapter planner_;
  const std::vector<std::string> link_names_;

  // Everything below is guarded by mu_.
  mutable std::mutex mu_;
  std::unordered_map<std::string, ClientState> clients_;
  std::map<std::string, JobState> jobs_;
  std::unordered_map<uint64_t, std::string> job_names_;  // planner id -> name
  std::vector<LinkSchedule> links_;                      // from the latest plan
  PlanSummary summary_;
  std::vector<Pending> pending_;
  std::vector<Outgoing> outbox_;
  std::optional<OfflineResult> offline_result_;
  uint64_t next_job_id_ = 0;
  uint64_t next_session_ = 0;
  uint64_t plan_version_ = 0;
  int64_t last_plan_ns_ = 0;
};

}  // namespace metronome::service
