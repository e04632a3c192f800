// The JSON status API, /healthz and /metrics: Service's snapshots and the route group that
// serves them (routes are listed in docs/scheduler.md, "HTTP API").
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "metronome/common/clock.hpp"
#include "metronome/service/routes.hpp"
#include "metronome/service/service.hpp"

namespace metronome::service {

using controller::PlanningError;
using controller::WhatIfEntry;

using nlohmann::json;

namespace {

json TimetableToJson(const JobState& job, int64_t now) {
  const Timetable& t = job.timetable;
  return json{{"job", job.name},
              {"version", t.version},
              {"epoch_ns", t.epoch_ns},
              {"period_ns", t.period_ns},
              {"offset_ns", t.offset_ns},
              {"window_ns", t.window_ns},
              {"late_slack_ns", t.late_slack_ns},
              {"max_wait_ns", t.max_wait_ns},
              {"gated", !AlwaysOpen(t)},
              {"best_effort", job.best_effort},
              {"next_window_ns", NextWindowStart(t, now)}};
}

json JobSummary(const JobState& job, int64_t now) {
  json j{{"job", job.name},
         {"id", job.id},
         {"priority", job.priority},
         {"world_size", job.world_size},
         {"ranks", job.ranks.size()},
         {"planned", job.planned},
         {"best_effort", job.best_effort},
         {"links", job.links},
         {"predicted_slowdown", job.predicted_slowdown},
         {"lateness_ewma_ns", static_cast<int64_t>(job.lateness_ewma_ns)},
         {"phases_seen", job.phases_seen},
         {"phases_late", job.phases_late},
         {"replans", job.replans}};
  j["profile"] = job.has_profile ? json{{"period_ns", job.period_ns},
                                        {"comm_ns", job.comm_ns},
                                        {"bytes_per_phase", job.bytes_per_phase},
                                        {"compute_ns", job.compute_ns},
                                        {"jitter_ns", job.jitter_ns},
                                        {"phase_floor_ns", job.phase_floor_ns},
                                        {"overrun_refused_ns", job.overrun_refused_ns},
                                        {"confidence", job.confidence}}
                                 : json(nullptr);
  j["timetable"] = job.planned ? TimetableToJson(job, now) : json(nullptr);
  return j;
}

}  // namespace

nlohmann::json Service::StatusJson() {
  std::lock_guard lock(mu_);
  size_t ranks = 0, planned = 0, best_effort = 0;
  for (const auto& [name, job] : jobs_) {
    ranks += job.ranks.size();
    planned += job.planned ? 1 : 0;
    best_effort += job.planned && job.best_effort ? 1 : 0;
  }
  const int64_t now = RealtimeNs();
  return json{{"status", "ok"},
              {"server_time_ns", now},
              {"uptime_s", static_cast<double>(now - started_ns_) * 1e-9},
              {"zmq_endpoint", bound_endpoint_},
              {"curve", config_.curve.enabled()},
              {"jobs", jobs_.size()},
              {"jobs_planned", planned},
              {"jobs_best_effort", best_effort},
              {"ranks", ranks},
              {"clients", clients_.size()},
              {"links", links_.size()},
              {"plan_version", plan_version_},
              {"last_plan_ns", last_plan_ns_},
              {"score",
               {{"utilization", summary_.utilization},
                {"latency", summary_.latency},
                {"cushion_ns", summary_.cushion_ns}}},
              {"rejected_messages", metrics_.CounterTotal("metronome_rejected_messages_total")},
              {"replans", metrics_.CounterTotal("metronome_replans_total")}};
}

nlohmann::json Service::JobsJson() {
  std::lock_guard lock(mu_);
  const int64_t now = RealtimeNs();
  json out = json::array();
  for (const auto& [name, job] : jobs_) out.push_back(JobSummary(job, now));
  return json{{"jobs", out}};
}

std::optional<nlohmann::json> Service::JobJson(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(name);
  if (it == jobs_.end()) return std::nullopt;
  const JobState& job = it->second;
  json j = JobSummary(job, RealtimeNs());
  json ranks = json::array();
  for (const auto& [r, rank] : job.ranks) {
    ranks.push_back({{"rank", r},
                     {"node", rank.node},
                     {"session", rank.session},
                     {"pid", rank.pid},
                     {"shim_version", rank.shim_version},
                     {"registered_ns", rank.registered_ns},
                     {"last_seen_ns", rank.last_seen_ns},
                     {"reports", rank.reports},
                     {"clock_offset_ns", rank.clock_offset_ns},
                     {"clock_error_ns", rank.clock_error_ns},
                     {"timetable_version", rank.timetable_version},
                     {"gated", rank.gated},
                     {"late", rank.late},
                     {"failed_open", rank.failed_open},
                     {"realigned", rank.realigned}});
  }
  j["rank_list"] = ranks;
  j["decisions"] = job.decisions;
  return j;
}

std::optional<nlohmann::json> Service::TimetableJson(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(name);
  if (it == jobs_.end()) return std::nullopt;
  if (!it->second.planned) return json(nullptr);
  return TimetableToJson(it->second, RealtimeNs());
}

std::optional<nlohmann::json> Service::PhasesJson(const std::string& name, size_t limit) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(name);
  if (it == jobs_.end()) return std::nullopt;
  const auto& phases = it->second.phases;
  json out = json::array();
  const size_t from = phases.size() > limit ? phases.size() - limit : 0;
  for (size_t i = from; i < phases.size(); ++i) {
    out.push_back({{"start_ns", phases[i].start_ns},
                   {"duration_ns", phases[i].duration_ns},
                   {"lateness_ns", phases[i].lateness_ns},
                   {"late", phases[i].late}});
  }
  return json{{"job", name}, {"phases", out}};
}

nlohmann::json Service::LinksJson() {
  std::lock_guard lock(mu_);
  std::map<std::string, std::vector<std::string>> members;
  for (const auto& [name, job] : jobs_) {
    for (const auto& l : job.links) members[l].push_back(name);
  }
  json out = json::array();
  for (const auto& l : links_) {
    out.push_back({{"link", l.name},
                   {"capacity_bytes_per_s", l.capacity_bytes_per_s},
                   {"hyperperiod_ns", l.hyperperiod_ns},
                   {"planned_utilization", l.served_load},
                   {"measured_utilization", MeasuredUtilization(l.name)},
                   {"min_cushion_ns", l.min_cushion_ns},
                   {"contention", l.contention},
                   {"gated_jobs", l.gated_jobs},
                   {"best_effort_jobs", l.best_effort_jobs},
                   {"jobs", members[l.name]}});
  }
  return json{{"links", out}};
}

nlohmann::json Service::TimelineJson(int64_t span_ns) {
  std::lock_guard lock(mu_);
  const int64_t now = RealtimeNs();
  std::map<std::string, std::vector<const JobState*>> members;
  for (const auto& [name, job] : jobs_) {
    for (const auto& l : job.links) members[l].push_back(&job);
  }
  json links = json::array();
  for (const auto& l : links_) {
    const auto m = members.find(l.name);
    if (m == members.end()) continue;
    json jobs = json::array();
    for (const JobState* job : m->second) {
      json entry{{"job", job->name},
                 {"priority", job->priority},
                 {"planned", job->planned},
                 {"best_effort", job->best_effort}};
      if (job->planned) entry["timetable"] = TimetableToJson(*job, now);
      json phases = json::array();
      for (const auto& p : job->phases) {
        if (p.start_ns + p.duration_ns < now - span_ns) continue;
        phases.push_back({p.start_ns, p.duration_ns, p.late});
      }
      entry["phases"] = phases;
      jobs.push_back(entry);
    }
    links.push_back({{"link", l.name},
                     {"planned_utilization", l.served_load},
                     {"measured_utilization", MeasuredUtilization(l.name)},
                     {"jobs", jobs}});
  }
  return json{
      {"now_ns", now}, {"span_ns", span_ns}, {"plan_version", plan_version_}, {"links", links}};
}

nlohmann::json Service::WhatIfJson(const nlohmann::json& req) {
  if (!req.is_object()) throw HttpError(400, "bad_field", "the body must be a JSON object");
  auto need_number = [&](const char* key, double lo, double hi) {
    if (!req.contains(key) || !req[key].is_number()) {
      throw HttpError(400, "bad_field", std::string(key) + ": a number is required");
    }
    const double v = req[key].get<double>();
    if (!(v >= lo && v <= hi)) {
      throw HttpError(400, "bad_field",
                      std::string(key) + ": must be in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
    }
    return v;
  };
  PlanJob job;
  if (req.contains("job") && !req["job"].is_string()) {
    throw HttpError(400, "bad_field", "job: must be a string");
  }
  job.name = req.value("job", std::string("what-if"));
  if (!req.contains("nodes") || !req["nodes"].is_array() || req["nodes"].empty() ||
      req["nodes"].size() > 100'000) {
    throw HttpError(400, "bad_field", "nodes: a non-empty list of node names is required");
  }
  for (const auto& n : req["nodes"]) {
    if (!n.is_string()) throw HttpError(400, "bad_field", "nodes: every entry must be a string");
    job.nodes.push_back(n.get<std::string>());
  }
  const double period_ms = need_number("period_ms", 0.1, 3.6e6);
  const double comm_ms = need_number("comm_ms", 0.0001, period_ms);
  job.period_ns = static_cast<int64_t>(period_ms * 1e6);
  job.comm_ns = static_cast<int64_t>(comm_ms * 1e6);
  job.priority =
      req.contains("priority") ? static_cast<int>(need_number("priority", -1000, 1000)) : 1;
  if (req.contains("bytes_per_phase")) {
    job.bytes_per_phase = static_cast<uint64_t>(need_number("bytes_per_phase", 0, 1e15));
  }
  std::map<uint64_t, std::string> names;
  {
    std::lock_guard lock(mu_);
    names.insert(job_names_.begin(), job_names_.end());
    job.id = next_job_id_ + 1'000'000;  // never collides with a registered job
  }
  std::vector<WhatIfEntry> entries;
  try {
    std::lock_guard plan_lock(plan_mu_);
    entries = planner_.WhatIf(job, names);
  } catch (const PlanningError& e) {
    throw HttpError(400, "bad_field", e.what());
  }
  json out = json::array();
  for (const auto& e : entries) {
    out.push_back({{"job", e.job},
                   {"candidate", e.candidate},
                   {"slowdown_now", e.slowdown_now},
                   {"slowdown_after", e.slowdown_after},
                   {"best_effort_after", e.best_effort_after}});
  }
  json crossed = json::array();
  for (uint32_t l : planner_.JobLinks(job)) crossed.push_back(link_names_[l]);
  return json{{"job", job.name}, {"links", crossed}, {"jobs", out}};
}

// ---------------------------------------------------------------------------------------------

void StatusRoutes::Register(HttpServer& server) {
  Service& s = service_;
  server.Get("healthz", "/healthz", [&s](const httplib::Request&, httplib::Response& res) {
    const json st = s.StatusJson();
    HttpServer::ReplyJson(res, json{{"status", "ok"}, {"uptime_s", st["uptime_s"]}}.dump());
  });
  server.Get("metrics", "/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    s.RefreshGauges();
    res.set_content(s.metrics().Serialize(), "text/plain; version=0.0.4");
  });
  server.Get("status", "/api/v1/status", [&s](const httplib::Request&, httplib::Response& res) {
    HttpServer::ReplyJson(res, s.StatusJson().dump());
  });
  server.Get("jobs", "/api/v1/jobs", [&s](const httplib::Request&, httplib::Response& res) {
    HttpServer::ReplyJson(res, s.JobsJson().dump());
  });
  auto job_name = [](const httplib::Request& req) {
    if (req.matches.size() < 2) throw HttpError(400, "bad_path", "no job in the path");
    return req.matches[1].str();
  };
  server.Get("job", R"(/api/v1/jobs/([^/]+))",
             [&s, job_name](const httplib::Request& req, httplib::Response& res) {
               const std::string name = job_name(req);
               auto j = s.JobJson(name);
               if (!j) throw HttpError(404, "unknown_job", "no job '" + name + "'");
               HttpServer::ReplyJson(res, j->dump());
             });
  server.Get("job_timetable", R"(/api/v1/jobs/([^/]+)/timetable)",
             [&s, job_name](const httplib::Request& req, httplib::Response& res) {
               const std::string name = job_name(req);
               auto j = s.TimetableJson(name);
               if (!j) throw HttpError(404, "unknown_job", "no job '" + name + "'");
               if (j->is_null()) {
                 throw HttpError(404, "not_planned",
                                 "job '" + name + "' has no timetable yet (no profile reported)");
               }
               HttpServer::ReplyJson(res, j->dump());
             });
  server.Get("job_phases", R"(/api/v1/jobs/([^/]+)/phases)",
             [&s, job_name](const httplib::Request& req, httplib::Response& res) {
               const std::string name = job_name(req);
               size_t limit = 256;
               if (req.has_param("limit")) {
                 const std::string v = req.get_param_value("limit");
                 if (v.empty() || v.size() > 6 ||
                     v.find_first_not_of("0123456789") != std::string::npos || std::stoul(v) == 0) {
                   throw HttpError(400, "bad_query", "limit: a positive integer is required");
                 }
                 limit = std::stoul(v);
               }
               auto j = s.PhasesJson(name, limit);
               if (!j) throw HttpError(404, "unknown_job", "no job '" + name + "'");
               HttpServer::ReplyJson(res, j->dump());
             });
  server.Get("links", "/api/v1/links", [&s](const httplib::Request&, httplib::Response& res) {
    HttpServer::ReplyJson(res, s.LinksJson().dump());
  });
  server.Get("timeline_data", "/api/v1/timeline",
             [&s](const httplib::Request& req, httplib::Response& res) {
               int64_t span_ms = 5000;
               if (req.has_param("span_ms")) {
                 const std::string v = req.get_param_value("span_ms");
                 if (v.empty() || v.size() > 7 ||
                     v.find_first_not_of("0123456789") != std::string::npos || std::stol(v) == 0) {
                   throw HttpError(400, "bad_query", "span_ms: a positive integer is required");
                 }
                 span_ms = std::stol(v);
               }
               HttpServer::ReplyJson(res, s.TimelineJson(span_ms * 1'000'000).dump());
             });
  server.Post("what_if", "/api/v1/plan/what-if",
              [&s](const httplib::Request& req, httplib::Response& res) {
                json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
                if (body.is_discarded()) {
                  throw HttpError(400, "bad_json", "the body is not valid JSON");
                }
                HttpServer::ReplyJson(res, s.WhatIfJson(body).dump());
              });
}

}  // namespace metronome::service
