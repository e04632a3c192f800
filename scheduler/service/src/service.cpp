#include "metronome/service/service.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>
#include <set>

#include "endpoint.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/service/routes.hpp"
#include "planning_worker.hpp"
#include "registry.hpp"

namespace metronome::service {

namespace {

ServiceConfig Resolve(ServiceConfig cfg) {
  cfg.Validate();
  if (!cfg.topology_file.empty()) cfg.topology = LoadTopologyFile(cfg.topology_file);
  return cfg;
}

}  // namespace

Service::Service(ServiceConfig config)
    : config_(Resolve(std::move(config))),
      http_(std::make_unique<HttpServer>(metrics_)),
      worker_(std::make_unique<PlanningWorker>(config_, metrics_)) {
  PlanningWorker& worker = *worker_;
  registry_ = std::make_unique<Registry>(
      config_, metrics_, [&worker](const PlanJob& job) { return worker.JobLinks(job); },
      worker.InitialPlan());
  endpoint_ = std::make_unique<Endpoint>(config_, metrics_, *registry_);
  registry_metrics_ = metrics_.AddCollector([this] { return registry_->MetricFamilies(); });
  // HTTPS when configured, for every user of the library (a bad file: ConfigError).
  if (config_.http_tls.Enabled()) http_->EnableTls(config_.http_tls);
  http_->LimitRate(config_.http_rate_limit);
  http_->AddRouteGroup(std::make_shared<StatusRoutes>(*this));
  http_->AddRouteGroup(std::make_shared<TimelineRoutes>());
}

Service::~Service() {
  Stop();
  metrics_.RemoveCollector(registry_metrics_);
}

std::string Service::ZmqEndpoint() const {
  return endpoint_->BoundEndpoint();
}

void Service::StartStandby() {
  if (http_started_) return;
  started_ns_ = RealtimeNs();
  const auto [host, port] = ParseHostPort("http", config_.http);
  http_->Start(host, port);
  http_started_ = true;
  spdlog::info("scheduler: standby, http={}:{}", host, http_->Port());
}

void Service::Start() {
  endpoint_->Bind();
  StartStandby();
  leading_ = true;
  metrics_.Leader().Set(1);
  spdlog::info("scheduler: listening zmq={} http={} links={} rank_timeout={}ms",
               endpoint_->BoundEndpoint(), config_.http, worker_->LinkCount(),
               config_.registry.rank_timeout_ms);
  endpoint_->Start();
  worker_->Start(*registry_, [this] { endpoint_->Wake(); });
  if (plan_listener_) {
    listener_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "mtr-listener");  // names show in top -H, perf, gdb
      ListenerLoop();
    });
  }
}

void Service::Stop() {
  if (stopping_.exchange(true)) return;
  registry_->Stop();  // wakes the planning and listener threads
  worker_->Stop();
  if (listener_thread_.joinable()) listener_thread_.join();
  endpoint_->Stop();
  if (http_) http_->Stop();
  spdlog::info("scheduler: stopped");
}

void Service::InheritPlan(const std::map<std::string, Timetable>& timetables, int64_t for_ms) {
  worker_->Inherit(timetables, for_ms);
  std::set<std::string> names;
  for (const auto& [name, timetable] : timetables) names.insert(name);
  registry_->WaitForLinks(std::move(names), RealtimeNs() + for_ms * 1'000'000);
}

void Service::EnablePodCheck() {
  registry_->EnablePodCheck();
}

void Service::SetPods(std::map<std::string, extender::PodInfo> pods) {
  registry_->SetPods(std::move(pods));
}

ClusterView Service::View() {
  return registry_->View(config_.topology, config_.planning);
}

// The plan listener's thread: the extender rebuilds its state from the view (milliseconds at
// hundreds of jobs, a tenth of a second at thousands), which must not hold up the next planning
// round. Plan changes that come while it runs, or while it rests, are coalesced into one call
// with the latest view; it rests four times as long as the call took, so that under a stream
// of re-plans it takes at most a fifth of a core from the endpoint and the planner.
void Service::ListenerLoop() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next;
  do {
    const Clock::time_point start = Clock::now();
    NotifyPlanListener();
    const Clock::time_point end = Clock::now();
    next = end + 4 * (end - start);
  } while (registry_->WaitForPlanChange(notified_version_, next));
}

void Service::NotifyPlanListener() {
  const uint64_t version = registry_->PlanVersion();
  if (version == notified_version_) return;
  notified_version_ = version;
  try {
    plan_listener_(View());
  } catch (const std::exception& e) {
    spdlog::error("scheduler: plan listener failed: {}", e.what());
  }
}

nlohmann::json Service::StatusJson() {
  return registry_->StatusJson(started_ns_, ZmqEndpoint(), config_.curve.Enabled());
}
nlohmann::json Service::JobsJson(size_t limit, const std::string& after) {
  return registry_->JobsJson(limit, after);
}
std::optional<nlohmann::json> Service::JobJson(const std::string& name) {
  return registry_->JobJson(name);
}
std::optional<nlohmann::json> Service::TimetableJson(const std::string& name) {
  return registry_->TimetableJson(name);
}
std::optional<nlohmann::json> Service::PhasesJson(const std::string& name, size_t limit) {
  return registry_->PhasesJson(name, limit);
}
std::optional<nlohmann::json> Service::LinksJson(size_t limit, const std::string& after) {
  return registry_->LinksJson(limit, after);
}
nlohmann::json Service::AllLinksJson() {
  return *registry_->LinksJson(std::numeric_limits<size_t>::max(), "");
}
nlohmann::json Service::TimelineJson(const TimelineQuery& query) {
  std::string unknown;
  auto j = registry_->TimelineJson(query, unknown);
  if (!j) throw HttpError(404, "unknown_link", "no link '" + unknown + "' in the plan");
  return *std::move(j);
}

}  // namespace metronome::service
