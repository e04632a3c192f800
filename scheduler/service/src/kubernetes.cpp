#include "metronome/service/kubernetes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "metronome/extender/kube_inputs.hpp"
#include "metronome/kube/cache.hpp"
#include "metronome/kube/client.hpp"
#include "metronome/kube/config.hpp"

namespace metronome::service {

namespace ext = metronome::extender;

extender::ExtenderConfig ExtenderConfigFor(const KubernetesConfig& cfg) {
  ext::ExtenderConfig c;
  c.rack_labels = {"metronome.dev/rack"};
  if (!cfg.rack_label.empty() && cfg.rack_label != "metronome.dev/rack") {
    c.rack_labels.push_back(cfg.rack_label);
  }
  return c;
}

extender::ClusterState ToClusterState(const ClusterView& view) {
  ext::ClusterState s;
  s.version = view.plan_version;
  s.network = view.topology;
  s.planning = view.planning;
  s.jobs = view.jobs;
  s.plan = view.plan;
  return s;
}

namespace {

constexpr double kNsPerMs = 1e6;

// What kind of link `name` is, and the nodes behind it, from the topology's naming.
void DescribeLink(const TopologyConfig& topo, const std::string& name,
                  kube::LinkScheduleSpec& spec) {
  spec.kind = "explicit";
  if (name.size() <= 3 || name.compare(name.size() - 3, 3, "/up") != 0) return;
  const std::string owner = name.substr(0, name.size() - 3);
  for (const auto& r : topo.racks) {
    if (r.name == owner) {
      spec.kind = "rack-uplink";
      for (const auto& n : r.nodes) spec.nodes.push_back(n.name);
      return;
    }
    for (const auto& n : r.nodes) {
      if (n.name == owner) {
        spec.kind = "node-uplink";
        spec.nodes = {owner};
        return;
      }
    }
  }
  if (topo.two_tier) {
    const auto& t = *topo.two_tier;
    for (uint32_t r = 0; r < t.racks; ++r) {
      const std::string rack = "r" + std::to_string(r);
      if (owner == rack) {
        spec.kind = "rack-uplink";
        for (uint32_t k = 0; k < t.nodes_per_rack; ++k) {
          spec.nodes.push_back(rack + "n" + std::to_string(k));
        }
        return;
      }
      for (uint32_t k = 0; k < t.nodes_per_rack; ++k) {
        if (owner == rack + "n" + std::to_string(k)) {
          spec.kind = "node-uplink";
          spec.nodes = {owner};
          return;
        }
      }
    }
  }
  spec.kind = "node-uplink";  // "<node>/up" of a node placed by labels only
  spec.nodes = {owner};
}

}  // namespace

std::vector<std::pair<kube::LinkScheduleSpec, kube::LinkScheduleStatus>> LinkSchedulesOf(
    const ClusterView& view, const nlohmann::json& links) {
  std::map<std::string, const ext::JobSnapshot*> jobs;
  for (const auto& j : view.jobs) jobs[j.name] = &j;
  std::vector<std::pair<kube::LinkScheduleSpec, kube::LinkScheduleStatus>> out;
  if (!links.is_array()) return out;
  for (const auto& l : links) {
    const std::string name = l.value("link", "");
    if (name.empty()) continue;
    kube::LinkScheduleSpec spec;
    spec.name = kube::LinkObjectName(name);
    spec.capacity_gbps = l.value("capacity_bytes_per_s", 0.0) * 8 / 1e9;
    DescribeLink(view.topology, name, spec);

    kube::LinkScheduleStatus status;
    status.plan_version = static_cast<int64_t>(view.plan_version);
    status.hyperperiod_ms = static_cast<double>(l.value("hyperperiod_ns", int64_t{0})) / kNsPerMs;
    status.planned_utilization = std::clamp(l.value("planned_utilization", 0.0), 0.0, 1.0);
    if (l.contains("measured_utilization") && l["measured_utilization"].is_number()) {
      status.measured_utilization = l["measured_utilization"].get<double>();
    }
    const int64_t cushion = l.value("min_cushion_ns", int64_t{-1});
    status.min_cushion_ms = cushion > 0 ? static_cast<double>(cushion) / kNsPerMs : 0.0;
    if (l.contains("jobs") && l["jobs"].is_array()) {
      for (const auto& jn : l["jobs"]) {
        if (!jn.is_string()) continue;
        const auto it = jobs.find(jn.get<std::string>());
        if (it == jobs.end()) continue;
        const ext::JobSnapshot& j = *it->second;
        kube::LinkScheduleJob entry;
        entry.name = j.name;
        entry.priority = j.priority;
        entry.best_effort = j.best_effort;
        if (j.planned) {
          entry.period_ms = static_cast<double>(j.timetable.period_ns) / kNsPerMs;
          entry.offset_ms = static_cast<double>(j.timetable.offset_ns) / kNsPerMs;
          entry.window_ms = static_cast<double>(j.timetable.window_ns) / kNsPerMs;
          entry.late_slack_ms = static_cast<double>(j.timetable.late_slack_ns) / kNsPerMs;
          if (j.profile.period_ns > 0) {
            entry.stretch = static_cast<double>(j.timetable.period_ns - j.profile.period_ns) /
                            static_cast<double>(j.profile.period_ns);
          }
        }
        status.jobs.push_back(std::move(entry));
      }
    }
    out.emplace_back(std::move(spec), std::move(status));
  }
  return out;
}

KubernetesSync::KubernetesSync(Service& service, extender::Extender& extender,
                               KubernetesConfig config)
    : service_(service), extender_(extender), config_(std::move(config)) {
  ext::RegisterNamedRoutes(service_.Http(), extender_, "/extender");
  // Its counters and latency histograms on /metrics (metronome_extender_*). Like the routes, the
  // collector calls the extender for as long as the service lives (main declares it first).
  service_.GetMetrics().AddCollector(
      [&extender = extender_] { return ExtenderMetricFamilies(extender.Stats()); });
  service_.SetPlanListener([this](const ClusterView& view) { OnPlan(view); });
  if (config_.enabled && config_.verify_pods) service_.EnablePodCheck();
}

KubernetesSync::~KubernetesSync() {
  Stop();
}

void KubernetesSync::OnPlan(const ClusterView& view) {
  {
    std::lock_guard lock(mu_);
    base_ = ToClusterState(view);
    ++plan_seen_;
  }
  Refresh();
  wake_.notify_all();
}

void KubernetesSync::Refresh() {
  std::lock_guard refresh(refresh_mu_);
  ext::ClusterState s;
  {
    std::lock_guard lock(mu_);
    s = base_;
  }
  if (nodes_ && profiles_ && pods_) {
    const auto stats = ext::ApplyKubeInputs(s, nodes_->Objects(), profiles_->Objects(),
                                            pods_->Objects(), extender_.Config().priority);
    const auto profiles = static_cast<uint64_t>(stats.profiles_skipped);
    const auto pods = static_cast<uint64_t>(stats.pods_skipped);
    // Said when the count changes (a refresh follows every watch event).
    const bool profiles_moved = unreadable_profiles_.exchange(profiles) != profiles;
    const bool pods_moved = unreadable_pods_.exchange(pods) != pods;
    if (profiles_moved || pods_moved) {
      if (profiles > 0 || pods > 0) {
        spdlog::warn("kubernetes: {} TrafficProfiles and {} pods do not parse: left out", profiles,
                     pods);
      }
    }
  }
  extender_.UpdateState(std::move(s));
}

void KubernetesSync::PublishPods() {
  std::map<std::string, ext::PodInfo> pods;
  for (const auto& [key, object] : pods_->Objects()) {
    try {
      pods.emplace(key, ext::ParsePod(object, extender_.Config().priority));
    } catch (const std::invalid_argument&) {
      // Not a pod a shim can name (no name): nothing to check a hello against.
    }
  }
  service_.SetPods(std::move(pods));
}

std::vector<kube::TrafficProfileStatus> TrafficProfileStatusesOf(
    const ClusterView& view, const std::map<std::string, nlohmann::json>& profiles) {
  std::map<std::string, const ext::JobSnapshot*> jobs;
  for (const ext::JobSnapshot& j : view.jobs) {
    if (j.profile.period_ns > 0) jobs.emplace(j.name, &j);
  }
  std::vector<kube::TrafficProfileStatus> out;
  for (const auto& [key, object] : profiles) {
    const auto p = kube::ParseTrafficProfile(object);
    if (!p) continue;
    const auto it = jobs.find(p->job_name);
    if (it == jobs.end()) continue;
    const ext::JobSnapshot& j = *it->second;
    kube::TrafficProfileStatus s;
    s.namespace_name = p->namespace_name;
    s.name = p->name;
    s.measured_period_ms = static_cast<double>(j.profile.period_ns) / kNsPerMs;
    s.measured_comm_ms = static_cast<double>(j.profile.comm_ns) / kNsPerMs;
    s.bytes_per_phase = j.profile.bytes_per_phase;
    s.reporting_ranks = static_cast<int>(j.nodes.size());
    out.push_back(std::move(s));
  }
  return out;
}

kube::Result<kube::ClientConfig> ApiServerConfig(const KubernetesConfig& cfg) {
  if (cfg.api_server.empty()) return kube::InClusterConfig();
  kube::ClientConfig c;
  c.server = cfg.api_server;
  c.token_file = cfg.token_file;
  c.ca_file = cfg.ca_file;
  return c;
}

kube::Result<std::map<std::string, Timetable>> ReadLastPlan(kube::Client& client, size_t* skipped) {
  auto list = client.List(kube::resources::LinkSchedules(), "");
  if (!list) return list.GetError();
  return LastPlanOf(*list, skipped);
}

std::map<std::string, Timetable> LastPlanOf(const nlohmann::json& list, size_t* skipped) {
  std::map<std::string, Timetable> out;
  size_t bad = 0;
  const TimetableLimits limits;
  const auto ns = [](double ms) { return static_cast<int64_t>(std::llround(ms * kNsPerMs)); };
  const auto items =
      list.is_object() ? list.value("items", nlohmann::json::array()) : nlohmann::json::array();
  for (const auto& item : items) {
    if (!item.is_object() || !item.contains("status")) continue;
    auto status = kube::ParseLinkScheduleStatus(item["status"]);
    if (!status) {
      ++bad;
      continue;
    }
    for (const kube::LinkScheduleJob& j : status->jobs) {
      if (j.best_effort || j.period_ms == 0) continue;  // ungated or unplanned: no slot
      // Checked before the conversion: a double far beyond int64 would not convert.
      const double max_ms = static_cast<double>(limits.max_period_ns) / kNsPerMs;
      if (!(j.period_ms > 0 && j.period_ms <= max_ms) ||
          !(j.window_ms > 0 && j.window_ms < j.period_ms) ||
          !(j.offset_ms >= 0 && j.offset_ms < j.period_ms) ||
          !(j.late_slack_ms >= 0 && j.late_slack_ms <= j.period_ms)) {
        ++bad;
        continue;
      }
      Timetable t;
      t.period_ns = ns(j.period_ms);
      t.window_ns = ns(j.window_ms);
      // Checked before the modulo: a period under a nanosecond rounds to 0.
      if (t.period_ns < limits.min_period_ns || t.window_ns >= t.period_ns) {
        ++bad;
        continue;
      }
      t.offset_ns = ns(j.offset_ms) % t.period_ns;
      t.late_slack_ns = ns(j.late_slack_ms);
      t.max_wait_ns = t.period_ns - t.window_ns;
      out.emplace(j.name, t);  // a job on several links is listed on each, the same
    }
  }
  if (skipped != nullptr) *skipped = bad;
  return out;
}

bool KubernetesSync::Start() {
  if (!config_.enabled) return false;
  auto cfg = ApiServerConfig(config_);
  if (!cfg.Ok()) {
    spdlog::error(
        "kubernetes: cannot read the in-cluster configuration ({}); continuing without the API "
        "server (no node labels, TrafficProfiles or LinkSchedules{})",
        cfg.GetError().ToString(),
        config_.verify_pods ? "; no shim's hello can be checked, so none registers" : "");
    return false;
  }
  Start(std::move(cfg).Value());
  return true;
}

void KubernetesSync::Start(kube::ClientConfig client_config) {
  client_ = std::make_unique<kube::Client>(std::move(client_config));
  const auto on_change = [this] { AskRefresh(false); };
  nodes_ = std::make_unique<kube::Cache>(*client_, kube::resources::Nodes(), "",
                                         kube::ListOptions{}, on_change);
  profiles_ = std::make_unique<kube::Cache>(*client_, kube::resources::TrafficProfiles(), "",
                                            kube::ListOptions{}, on_change);
  kube::ListOptions pods;
  pods.field_selector = "spec.schedulerName=metronome";
  pods_ = std::make_unique<kube::Cache>(*client_, kube::resources::Pods(), "", pods,
                                        [this] { AskRefresh(config_.verify_pods); });
  collector_ = service_.GetMetrics().AddCollector([this] { return KubeMetricFamilies(Stats()); });
  refresher_ = std::jthread([this](std::stop_token stop) { RefresherLoop(stop); });
  nodes_->Start();
  profiles_->Start();
  pods_->Start();
  writer_ = std::jthread([this](std::stop_token stop) { WriterLoop(stop); });
  spdlog::info("kubernetes: watching Nodes, TrafficProfiles and Metronome pods at {}",
               client_->Config().server);
}

void KubernetesSync::Stop() {
  if (collector_ >= 0) {
    service_.GetMetrics().RemoveCollector(collector_);  // waits for a scrape that runs it
    collector_ = -1;
  }
  if (writer_.joinable()) {
    writer_.request_stop();
    wake_.notify_all();
    writer_.join();
  }
  if (pods_) pods_->Stop();
  if (profiles_) profiles_->Stop();
  if (nodes_) nodes_->Stop();
  if (refresher_.joinable()) {
    refresher_.request_stop();
    refresher_.join();
  }
}

void KubernetesSync::AskRefresh(bool pods) {
  {
    std::lock_guard lock(ask_mu_);
    refresh_asked_ = true;
    pods_asked_ = pods_asked_ || pods;
  }
  asked_.notify_all();
}

void KubernetesSync::RefresherLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    bool pods = false;
    {
      std::unique_lock lock(ask_mu_);
      if (!asked_.wait(lock, stop, [&] { return refresh_asked_; })) break;
      refresh_asked_ = false;
      pods = std::exchange(pods_asked_, false);
    }
    Refresh();
    if (pods) PublishPods();
    // What arrives meanwhile waits for the next round.
    std::unique_lock lock(ask_mu_);
    asked_.wait_for(lock, stop, std::chrono::milliseconds(kRefreshEveryMs), [] { return false; });
  }
}

void KubernetesSync::WriterLoop(std::stop_token stop) {
  kube::LinkScheduleWriter writer(*client_);
  kube::TrafficProfileStatusWriter profile_writer(*client_);
  uint64_t written_for = UINT64_MAX;
  int passes = 0;
  while (!stop.stop_requested()) {
    {
      // Wake on a plan change, or every 10 s to republish (unchanged links cost nothing).
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, stop, std::chrono::seconds(10),
                     [&] { return plan_seen_ != written_for; });
      if (stop.stop_requested()) break;
      written_for = plan_seen_;
    }
    // Snapshots under the service lock, briefly; the API calls without it.
    const ClusterView view = service_.View();
    const nlohmann::json links = service_.AllLinksJson()["links"];
    const auto outcome = writer.Write(LinkSchedulesOf(view, links));
    if (outcome.failed > 0) {
      write_failures_ += static_cast<uint64_t>(outcome.failed);
      spdlog::warn("kubernetes: {} LinkSchedule writes failed (first: {})", outcome.failed,
                   outcome.first_error.ToString());
    } else if (outcome.written > 0) {
      spdlog::debug("kubernetes: wrote {} LinkSchedules ({} unchanged)", outcome.written,
                    outcome.unchanged);
    }
    // What the shims measured, into the status of their jobs' TrafficProfiles.
    const auto profiles =
        profile_writer.Write(TrafficProfileStatusesOf(view, profiles_->Objects()));
    if (profiles.failed > 0) {
      profile_write_failures_ += static_cast<uint64_t>(profiles.failed);
      spdlog::warn("kubernetes: {} TrafficProfile status writes failed (first: {})",
                   profiles.failed, profiles.first_error.ToString());
    }
    if (++passes % 30 == 0) {  // rewrite everything every few minutes
      writer.Forget();
      profile_writer.Forget();
    }
  }
}

KubeStats KubernetesSync::Stats() const {
  KubeStats s;
  for (const auto& [name, cache] :
       {std::pair{"nodes", nodes_.get()}, std::pair{"trafficprofiles", profiles_.get()},
        std::pair{"pods", pods_.get()}}) {
    if (cache != nullptr) s.watched.push_back({name, cache->Lists(), cache->Errors()});
  }
  s.retries = client_ ? client_->Retries() : 0;
  s.unreadable_profiles = unreadable_profiles_;
  s.unreadable_pods = unreadable_pods_;
  s.schedule_write_failures = write_failures_;
  s.profile_write_failures = profile_write_failures_;
  return s;
}

}  // namespace metronome::service
