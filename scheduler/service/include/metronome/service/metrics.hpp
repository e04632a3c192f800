// Every metric the scheduler exports (Prometheus text format at /metrics), in one registry.
// Counters and histograms are updated where events happen. What describes the state (jobs,
// links, utilization, a job's yields) is built from the service's registry at each scrape, and
// parts that keep their own counters (the kube-scheduler extender) do the same: each adds a
// collector that turns what it holds into metric families.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace metronome::extender {
struct ExtenderStats;
}

namespace metronome::service {

class Metrics {
 public:
  Metrics();

  std::string Serialize() const;

  // Messages at the ZeroMQ endpoint.
  prometheus::Counter& Received(const std::string& type);
  prometheus::Counter& Sent(const std::string& type);
  prometheus::Counter& Rejected(const std::string& reason);  // answered with an Error
  prometheus::Counter& SendFailed(const std::string& reason);

  // Registry and planning.
  prometheus::Counter& Registrations(const std::string& kind);  // new, re-registration
  prometheus::Counter& JobsRemoved(const std::string& reason);  // bye, timeout
  prometheus::Counter& Replans(const std::string& reason);
  prometheus::Counter& ControllerDecisions(const std::string& decision);
  prometheus::Counter& OfflineRuns(const std::string& result);
  prometheus::Counter& TimetablePushes(const std::string& reason);
  prometheus::Counter& PhasesMeasured() { return *phases_measured_; }
  prometheus::Counter& PhasesLate() { return *phases_late_; }
  prometheus::Counter& PhasesRealigned() { return *phases_realigned_; }
  prometheus::Counter& RankTimeouts() { return *rank_timeouts_; }
  prometheus::Counter& PlanningErrors() { return *planning_errors_; }
  prometheus::Counter& RoundsYielded() { return *rounds_yielded_; }
  prometheus::Histogram& PlanDuration() { return *plan_duration_; }
  prometheus::Histogram& PushLatency() { return *push_latency_; }
  prometheus::Histogram& PhaseLateness() { return *phase_lateness_; }
  // Taking turns: phase edges by what became of them (relayed, no_partner, other_rank, off),
  // the relayed messages, the sets pushed, and how old an edge was when it was relayed.
  prometheus::Counter& TurnEdges(const std::string& outcome);
  prometheus::Counter& TurnEdgesRelayed() { return *turn_edges_relayed_; }
  prometheus::Counter& TurnPushes() { return *turn_pushes_; }
  prometheus::Histogram& TurnEdgeAge() { return *turn_edge_age_; }
  // How long a recomputation of every job's set held the registry (its lock, on the endpoint
  // thread): it visits every job after each join or leave.
  prometheus::Histogram& TurnsRefreshDuration() { return *turns_refresh_duration_; }

  // 1 while this replica plans. The jobs', links' and ranks' gauges come from the registry's
  // collector (Registry::MetricFamilies), built from its state at each scrape.
  prometheus::Gauge& Leader() { return *leader_; }

  // HTTP.
  prometheus::Counter& HttpRequests(const std::string& route, int status);
  prometheus::Counter& HttpRejected(const std::string& route, const std::string& reason);
  prometheus::Histogram& HttpLatency(const std::string& route);

  // Families computed at each scrape by another part, serialized after the registry's. The
  // collector runs on an HTTP thread and must do its own locking; it must stay callable until
  // it is removed (or this object is gone).
  using Collector = std::function<std::vector<prometheus::MetricFamily>()>;
  int AddCollector(Collector collector);
  void RemoveCollector(int id);
  // A collector's building blocks: a family, and a sample of a gauge or counter family.
  static prometheus::MetricFamily Family(const char* name, const char* help,
                                         prometheus::MetricType type);
  static void AddSample(prometheus::MetricFamily& family,
                        std::vector<prometheus::ClientMetric::Label> labels, double value);

  // The value of a counter family summed over its labels (for tests and the status API).
  double CounterTotal(const std::string& family) const;

 private:
  std::vector<prometheus::MetricFamily> Collect() const;

  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex collectors_mu_;
  std::map<int, Collector> collectors_;
  int next_collector_ = 0;
  prometheus::Family<prometheus::Counter>* received_;
  prometheus::Family<prometheus::Counter>* sent_;
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Counter>* send_failed_;
  prometheus::Family<prometheus::Counter>* registrations_;
  prometheus::Family<prometheus::Counter>* jobs_removed_;
  prometheus::Family<prometheus::Counter>* replans_;
  prometheus::Family<prometheus::Counter>* decisions_;
  prometheus::Family<prometheus::Counter>* offline_runs_;
  prometheus::Family<prometheus::Counter>* pushes_;
  prometheus::Family<prometheus::Counter>* turn_edges_;
  prometheus::Counter* turn_edges_relayed_;
  prometheus::Counter* turn_pushes_;
  prometheus::Histogram* turn_edge_age_;
  prometheus::Histogram* turns_refresh_duration_;
  prometheus::Family<prometheus::Counter>* http_requests_;
  prometheus::Family<prometheus::Counter>* http_rejected_;
  prometheus::Family<prometheus::Histogram>* http_latency_;
  prometheus::Counter* phases_measured_;
  prometheus::Counter* phases_late_;
  prometheus::Counter* phases_realigned_;
  prometheus::Counter* rank_timeouts_;
  prometheus::Counter* planning_errors_;
  prometheus::Counter* rounds_yielded_;
  prometheus::Histogram* plan_duration_;
  prometheus::Histogram* push_latency_;
  prometheus::Histogram* phase_lateness_;
  prometheus::Gauge* leader_;
};

// The kube-scheduler extender's counters as metric families (metronome_extender_*): calls, 400s
// and handling-time histograms per verb, nodes filtered out, neutral answers, never-starve passes,
// reused decisions, snapshot rebuilds and the cluster-state version in use.
std::vector<prometheus::MetricFamily> ExtenderMetricFamilies(const extender::ExtenderStats& stats);

// What the API server side has met (KubernetesSync): per watched resource, its lists (1 + one
// per 410 Gone or failure) and its list and watch errors; the client's retried requests; the
// objects in the caches that do not parse; the LinkSchedule and TrafficProfile status writes
// that failed.
struct KubeStats {
  struct Watched {
    const char* resource = "";
    uint64_t lists = 0;
    uint64_t errors = 0;
  };
  std::vector<Watched> watched;
  uint64_t retries = 0;
  uint64_t unreadable_profiles = 0;
  uint64_t unreadable_pods = 0;
  uint64_t schedule_write_failures = 0;
  uint64_t profile_write_failures = 0;
};
std::vector<prometheus::MetricFamily> KubeMetricFamilies(const KubeStats& stats);

}  // namespace metronome::service
