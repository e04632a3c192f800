// metronome-scheduler's Kubernetes side: the kube-scheduler extender's cluster state, built from
// the service's view after every plan change, and (with `kubernetes.enabled`) the API server's
// Nodes, TrafficProfiles and Metronome pods folded into it, one LinkSchedule per link written
// from the plan on a thread of its own (never under the service lock), and the pods handed to the
// service's check of each shim's identity (kubernetes.verify_pods).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/extender/extender.hpp"
#include "metronome/extender/state.hpp"
#include "metronome/kube/config.hpp"
#include "metronome/kube/resources.hpp"
#include "metronome/kube/result.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/metrics.hpp"
#include "metronome/service/service.hpp"

namespace metronome::kube {
class Client;
class Cache;
}  // namespace metronome::kube

namespace metronome::service {

// The extender's configuration for this service: rack labels "metronome.dev/rack", then
// kubernetes.rack_label.
extender::ExtenderConfig ExtenderConfigFor(const KubernetesConfig& cfg);

// The extender's ClusterState from the service's view (network as in the topology, rates in
// bytes/s; jobs with their measured profile and current timetable).
extender::ClusterState ToClusterState(const ClusterView& view);

// One LinkSchedule per link of the plan: `links` is Service::AllLinksJson()["links"].
std::vector<std::pair<kube::LinkScheduleSpec, kube::LinkScheduleStatus>> LinkSchedulesOf(
    const ClusterView& view, const nlohmann::json& links);

// The status of each TrafficProfile whose job the service has measured (`profiles`: the cache's
// objects; those that do not parse, or whose job has no measured period yet, are left out).
std::vector<kube::TrafficProfileStatus> TrafficProfileStatusesOf(
    const ClusterView& view, const std::map<std::string, nlohmann::json>& profiles);

// How to reach the API server: kubernetes.api_server (with its token and CA files) when set,
// else the in-cluster configuration.
kube::Result<kube::ClientConfig> ApiServerConfig(const KubernetesConfig& cfg);

// The plan a leader left in the LinkSchedules' status: each gated job's timetable by job name
// (offsets from the configured epoch). Entries that are no usable timetable are skipped and
// counted in `skipped`.
kube::Result<std::map<std::string, Timetable>> ReadLastPlan(kube::Client& client,
                                                            size_t* skipped = nullptr);
// The same from a LinkSchedule list already read.
std::map<std::string, Timetable> LastPlanOf(const nlohmann::json& list, size_t* skipped = nullptr);

class KubernetesSync {
 public:
  // Mounts the extender's routes (/extender/filter, /extender/prioritize) on the service's HTTP
  // server and sets the service's plan listener. Construct before Service::Start().
  KubernetesSync(Service& service, extender::Extender& extender, KubernetesConfig config);
  ~KubernetesSync();
  KubernetesSync(const KubernetesSync&) = delete;
  KubernetesSync& operator=(const KubernetesSync&) = delete;

  // With kubernetes.enabled: reads the configuration (ApiServerConfig) and starts the caches and
  // the LinkSchedule writer. Returns false (after logging an error) when the configuration cannot
  // be read; the extender then works from the service's state alone (and with verify_pods no hello
  // registers: the shims run ungated).
  bool Start();
  // The same against a given API server (out-of-cluster runs, tests).
  void Start(kube::ClientConfig client_config);
  void Stop();

 private:
  void OnPlan(const ClusterView& view);
  void Refresh();
  void PublishPods();  // the pods cache's content to the service's pod check
  // A watch event asks for a refresh (and the pods' publication); the refresher thread does it,
  // at most once per kRefreshEveryMs, so that a burst of events costs one rebuild, not one each,
  // and the watch threads go back to reading their streams at once.
  void AskRefresh(bool pods);
  void RefresherLoop(std::stop_token stop);
  void WriterLoop(std::stop_token stop);
  static constexpr int kRefreshEveryMs = 100;
  KubeStats Stats() const;  // for /metrics (KubeMetricFamilies)

  Service& service_;
  extender::Extender& extender_;
  KubernetesConfig config_;

  std::mutex mu_;  // guards base_, plan_seen_
  extender::ClusterState base_;
  uint64_t plan_seen_ = 0;
  std::mutex refresh_mu_;  // one refresh at a time, so the newest state lands last
  std::condition_variable_any wake_;

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::Cache> nodes_, profiles_, pods_;
  std::mutex ask_mu_;  // guards the two asks
  bool refresh_asked_ = false;
  bool pods_asked_ = false;
  std::condition_variable_any asked_;
  std::jthread refresher_, writer_;
  int collector_ = -1;  // Stats() on /metrics while started
  std::atomic<uint64_t> unreadable_profiles_{0}, unreadable_pods_{0}, write_failures_{0},
      profile_write_failures_{0};
};

}  // namespace metronome::service
