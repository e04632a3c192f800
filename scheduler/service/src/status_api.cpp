// The JSON status API, /healthz and /metrics: the route group that serves the registry's
// snapshots (registry_status.cpp) and the what-if (routes are listed in docs/scheduler.md,
// "HTTP API").
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "metronome/common/clock.hpp"
#include "metronome/service/routes.hpp"
#include "metronome/service/service.hpp"
#include "planning_worker.hpp"
#include "registry.hpp"

namespace metronome::service {

using controller::PlanningError;
using controller::WhatIfEntry;

using nlohmann::json;

namespace {

constexpr size_t kMaxNamedLinks = 64;  // link= parameters of one timeline request
// Jobs a page of /api/v1/jobs holds: the list of 8,192 jobs took 0.6-0.9 s to read.
constexpr size_t kJobsPage = 500;
constexpr size_t kMaxJobsPage = 10'000;
// Links likewise: the whole list of a large cluster is megabytes (9,216 links: 2.3 MB, 0.15-0.5 s
// of the scheduler's core).
constexpr size_t kLinksPage = 500;
constexpr size_t kMaxLinksPage = 10'000;

// A query parameter that must be a positive integer of at most `max` (`fallback` when absent).
size_t PositiveParam(const httplib::Request& req, const char* name, size_t fallback, size_t max) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  const bool digits =
      !v.empty() && v.size() <= 7 && v.find_first_not_of("0123456789") == std::string::npos;
  const size_t n = digits ? std::stoul(v) : 0;
  if (n == 0 || n > max) {
    throw HttpError(
        400, "bad_query",
        std::string(name) + ": an integer from 1 to " + std::to_string(max) + " is required");
  }
  return n;
}

}  // namespace

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
  job.profile.period_ns = static_cast<int64_t>(period_ms * 1e6);
  job.profile.comm_ns = static_cast<int64_t>(comm_ms * 1e6);
  job.priority =
      req.contains("priority") ? static_cast<int>(need_number("priority", -1000, 1000)) : 1;
  if (req.contains("bytes_per_phase")) {
    job.profile.bytes_per_phase = static_cast<uint64_t>(need_number("bytes_per_phase", 0, 1e15));
  }
  const std::map<uint64_t, std::string> names = registry_->JobNames(job.id);
  std::vector<WhatIfEntry> entries;
  try {
    entries = worker_->WhatIf(job, names);
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
  return json{{"job", job.name}, {"links", worker_->JobLinks(job)}, {"jobs", out}};
}

// ---------------------------------------------------------------------------------------------

void StatusRoutes::Register(HttpServer& server) {
  Service& s = service_;
  // Liveness on every replica; readiness only where the shims should go (the leader).
  server.Get("healthz", "/healthz", [&s](const httplib::Request&, httplib::Response& res) {
    const json st = s.StatusJson();
    HttpServer::ReplyJson(res, json{{"status", "ok"},
                                    {"role", s.Leading() ? "leader" : "standby"},
                                    {"uptime_s", st["uptime_s"]}}
                                   .dump());
  });
  server.Get("readyz", "/readyz", [&s](const httplib::Request&, httplib::Response& res) {
    const bool leading = s.Leading();
    HttpServer::ReplyJson(res, json{{"status", leading ? "ready" : "standby"}}.dump(),
                          leading ? 200 : 503);
  });
  server.Get("metrics", "/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s.GetMetrics().Serialize(), "text/plain; version=0.0.4");
  });
  server.Get("status", "/api/v1/status", [&s](const httplib::Request&, httplib::Response& res) {
    HttpServer::ReplyJson(res, s.StatusJson().dump());
  });
  server.Get("jobs", "/api/v1/jobs", [&s](const httplib::Request& req, httplib::Response& res) {
    const size_t limit = PositiveParam(req, "limit", kJobsPage, kMaxJobsPage);
    const std::string after = req.has_param("continue") ? req.get_param_value("continue") : "";
    if (after.size() > proto::kMaxStringBytes) {
      throw HttpError(400, "bad_query", "continue: longer than any job's name");
    }
    HttpServer::ReplyJson(res, s.JobsJson(limit, after).dump());
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
               auto j = s.PhasesJson(name, PositiveParam(req, "limit", 256, 999'999));
               if (!j) throw HttpError(404, "unknown_job", "no job '" + name + "'");
               HttpServer::ReplyJson(res, j->dump());
             });
  server.Get("links", "/api/v1/links", [&s](const httplib::Request& req, httplib::Response& res) {
    const size_t limit = PositiveParam(req, "limit", kLinksPage, kMaxLinksPage);
    const std::string after = req.has_param("continue") ? req.get_param_value("continue") : "";
    if (after.size() > proto::kMaxStringBytes) {
      throw HttpError(400, "bad_query", "continue: longer than any link's name");
    }
    const auto page = s.LinksJson(limit, after);
    if (!page) throw HttpError(400, "bad_query", "continue: no link named '" + after + "'");
    HttpServer::ReplyJson(res, page->dump());
  });
  server.Get("timeline_data", "/api/v1/timeline",
             [&s](const httplib::Request& req, httplib::Response& res) {
               TimelineQuery q;
               q.span_ns =
                   static_cast<int64_t>(PositiveParam(req, "span_ms", 5000, 9'999'999)) * 1'000'000;
               q.max_links = PositiveParam(req, "links", q.max_links, 99'999);
               const size_t named = req.get_param_value_count("link");
               if (named > kMaxNamedLinks) {
                 throw HttpError(400, "bad_query",
                                 "link: at most " + std::to_string(kMaxNamedLinks) + " links");
               }
               for (size_t i = 0; i < named; ++i) {
                 std::string v = req.get_param_value("link", i);
                 if (v.empty() || v.size() > proto::kMaxStringBytes) {
                   throw HttpError(400, "bad_query", "link: a link's name is required");
                 }
                 q.links.push_back(std::move(v));
               }
               HttpServer::ReplyJson(res, s.TimelineJson(q).dump());
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
