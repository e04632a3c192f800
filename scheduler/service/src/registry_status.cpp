// The registry's JSON snapshots for the status API (routes: status_api.cpp; listed in
// docs/scheduler.md, "HTTP API").
#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "metronome/common/clock.hpp"
#include "registry.hpp"

namespace metronome::service {

using nlohmann::json;

namespace {

// The higher-ranked windows the job yields to (offsets from the timetable's epoch).
json YieldsToJson(const YieldSet& y) {
  json windows = json::array();
  for (uint32_t i = 0; i < y.count && i < kMaxYieldWindows; ++i) {
    windows.push_back({{"period_ns", y.windows[i].period_ns},
                       {"offset_ns", y.windows[i].offset_ns},
                       {"window_ns", y.windows[i].window_ns}});
  }
  return json{{"need_ns", y.need_ns},
              {"max_wait_ns", y.max_wait_ns},
              {"tolerance_ns", y.tolerance_ns},
              {"windows", windows}};
}

// What the status API shows of a job, copied under the registry's lock. The JSON is built after
// it: at tens of microseconds a job, the whole list of 8,192 jobs held the lock (and every
// report and clock ping behind it) for 0.18 s.
struct JobRow {
  std::string name;
  uint64_t id = 0;
  int32_t priority = 0;
  std::string pod_namespace;
  uint32_t world_size = 0;
  size_t ranks = 0;
  bool planned = false;
  bool best_effort = false;
  bool yielded_to = false;
  std::vector<std::string> links;
  double predicted_slowdown = 0.0;
  double lateness_ewma_ns = 0.0;
  uint64_t phases_seen = 0;
  uint64_t phases_late = 0;
  uint64_t replans = 0;
  uint64_t yields = 0;  // the ranks' collectives held for higher-ranked windows (cumulative)
  int64_t yield_wait_ns = 0;
  bool has_profile = false;
  controller::MeasuredProfile profile;
  double confidence = 0.0;
  int64_t overrun_refused_ns = 0;
  std::string overrun_deferred_to;
  Timetable timetable;
  YieldSet yield_set;
  std::vector<controller::MeasuredPhase> phases;  // the timeline's only: those within its span
};

JobRow RowOf(const JobState& job) {
  JobRow r;
  r.name = job.name;
  r.id = job.id;
  r.priority = job.priority;
  r.pod_namespace = job.pod_namespace;
  r.world_size = job.world_size;
  r.ranks = job.ranks.size();
  r.planned = job.planned;
  r.best_effort = job.best_effort;
  r.yielded_to = job.yielded_to;
  r.links = job.links;
  r.predicted_slowdown = job.predicted_slowdown;
  r.lateness_ewma_ns = job.lateness_ewma_ns;
  r.phases_seen = job.phases_seen;
  r.phases_late = job.phases_late;
  r.replans = job.replans;
  r.has_profile = job.has_profile;
  r.profile = job.profile;
  r.confidence = job.confidence;
  r.overrun_refused_ns = job.overrun_refused_ns;
  r.overrun_deferred_to = job.overrun_deferred_to;
  r.timetable = job.timetable;
  r.yield_set = job.yields;  // a job not planned yet may yield too (RefreshObservers)
  for (const auto& [rank_id, rank] : job.ranks) {
    r.yields += rank.yielded;
    r.yield_wait_ns += rank.yield_wait_ns;
  }
  return r;
}

json TimetableToJson(const JobRow& job, int64_t now) {
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
              {"next_window_ns", NextWindowStart(t, now)},
              {"yields", YieldsToJson(job.yield_set)}};
}

json JobSummary(const JobRow& job, int64_t now) {
  json j{{"job", job.name},
         {"id", job.id},
         {"priority", job.priority},
         {"namespace", job.pod_namespace},
         {"world_size", job.world_size},
         {"ranks", job.ranks},
         {"planned", job.planned},
         {"best_effort", job.best_effort},
         {"links", job.links},
         {"predicted_slowdown", job.predicted_slowdown},
         {"lateness_ewma_ns", static_cast<int64_t>(job.lateness_ewma_ns)},
         {"phases_seen", job.phases_seen},
         {"phases_late", job.phases_late},
         {"replans", job.replans},
         {"yielded_to", job.yielded_to},
         {"yields", job.yields},
         {"yield_wait_ns", job.yield_wait_ns}};
  j["profile"] = job.has_profile ? json{{"period_ns", job.profile.period_ns},
                                        {"comm_ns", job.profile.comm_ns},
                                        {"bytes_per_phase", job.profile.bytes_per_phase},
                                        {"compute_ns", job.profile.compute_ns},
                                        {"jitter_ns", job.profile.jitter_ns},
                                        {"phase_floor_ns", job.profile.phase_floor_ns},
                                        {"overrun_refused_ns", job.overrun_refused_ns},
                                        {"overrun_deferred_to", job.overrun_deferred_to},
                                        {"confidence", job.confidence}}
                                 : json(nullptr);
  // What its ranks were pushed: for a job not planned yet, a timetable that holds nothing and
  // the windows it yields to, if any.
  j["timetable"] = job.timetable.version > 0 ? TimetableToJson(job, now) : json(nullptr);
  return j;
}

}  // namespace

nlohmann::json Registry::StatusJson(int64_t started_ns, const std::string& endpoint, bool curve) {
  Tally t;
  uint64_t plan_version = 0;
  int64_t last_plan_ns = 0;
  double utilization = 0.0, latency = 0.0, cushion_ns = 0.0;
  {
    std::lock_guard lock(mu_);
    t = TallyLocked();
    plan_version = plan_version_;
    last_plan_ns = last_plan_ns_;
    utilization = summary_.utilization;
    latency = summary_.latency;
    cushion_ns = summary_.cushion_ns;
  }
  const int64_t now = RealtimeNs();
  return json{
      {"status", "ok"},
      {"server_time_ns", now},
      {"uptime_s", static_cast<double>(now - started_ns) * 1e-9},
      {"zmq_endpoint", endpoint},
      {"curve", curve},
      {"jobs", t.jobs},
      {"jobs_planned", t.planned},
      {"jobs_best_effort", t.best_effort},
      {"ranks", t.ranks},
      {"clients", t.clients},
      {"links", t.links},
      {"plan_version", plan_version},
      {"last_plan_ns", last_plan_ns},
      {"score", {{"utilization", utilization}, {"latency", latency}, {"cushion_ns", cushion_ns}}},
      {"rejected_messages", metrics_.CounterTotal("metronome_rejected_messages_total")},
      {"replans", metrics_.CounterTotal("metronome_replans_total")}};
}

nlohmann::json Registry::JobsJson(size_t limit, const std::string& after) {
  std::vector<JobRow> rows;
  size_t total = 0;
  bool more = false;
  {
    std::lock_guard lock(mu_);
    total = jobs_.size();
    auto it = after.empty() ? jobs_.begin() : jobs_.upper_bound(after);
    for (; it != jobs_.end() && rows.size() < limit; ++it) rows.push_back(RowOf(it->second));
    more = it != jobs_.end();
  }
  const int64_t now = RealtimeNs();
  json out = json::array();
  for (const auto& row : rows) out.push_back(JobSummary(row, now));
  json page{{"jobs", out}, {"total", total}};
  if (more && !rows.empty()) page["continue"] = rows.back().name;
  return page;
}

std::optional<nlohmann::json> Registry::JobJson(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(name);
  if (it == jobs_.end()) return std::nullopt;
  const JobState& job = it->second;
  json j = JobSummary(RowOf(job), RealtimeNs());
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
                     {"realigned", rank.realigned},
                     {"yielded", rank.yielded},
                     {"yield_wait_ns", rank.yield_wait_ns}});
  }
  j["rank_list"] = ranks;
  j["decisions"] = job.decisions;
  return j;
}

std::optional<nlohmann::json> Registry::TimetableJson(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(name);
  if (it == jobs_.end()) return std::nullopt;
  if (it->second.timetable.version == 0) return json(nullptr);
  return TimetableToJson(RowOf(it->second), RealtimeNs());
}

std::optional<nlohmann::json> Registry::PhasesJson(const std::string& name, size_t limit) {
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

nlohmann::json Registry::LinksJson() {
  std::vector<LinkSchedule> links;
  std::unordered_map<std::string, std::vector<std::string>> members;
  std::unordered_map<std::string, double> measured;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, job] : jobs_) {
      for (const auto& l : job.links) members[l].push_back(name);
    }
    measured = MeasuredUtilizations();
    links = summary_.links;
  }
  json out = json::array();
  for (const auto& l : links) {
    out.push_back({{"link", l.name},
                   {"capacity_bytes_per_s", l.capacity_bytes_per_s},
                   {"hyperperiod_ns", l.hyperperiod_ns},
                   {"planned_utilization", l.served_load},
                   {"measured_utilization", measured[l.name]},
                   {"min_cushion_ns", l.min_cushion_ns},
                   {"contention", l.contention},
                   {"gated_jobs", l.gated_jobs},
                   {"best_effort_jobs", l.best_effort_jobs},
                   {"jobs", members[l.name]}});
  }
  return json{{"links", out}};
}

std::optional<nlohmann::json> Registry::TimelineJson(const TimelineQuery& q,
                                                     std::string& unknown_link) {
  const int64_t now = RealtimeNs();
  struct Lane {
    std::string link;
    double served_load = 0.0;
    std::vector<size_t> rows;  // into `rows`, the link's jobs
  };
  std::vector<Lane> lanes;
  std::vector<JobRow> rows;
  std::unordered_map<std::string, double> measured;
  uint64_t plan_version = 0;
  size_t links_total = 0;
  {
    std::lock_guard lock(mu_);
    plan_version = plan_version_;
    // Every link's jobs: cheap (names and pointers); the rows, the costly part, are copied for
    // the links answered only.
    std::unordered_map<std::string_view, std::vector<const JobState*>> members;
    for (const auto& [name, job] : jobs_) {
      for (const auto& l : job.links) members[l].push_back(&job);
    }
    std::vector<Lane> candidates;
    std::vector<const std::vector<const JobState*>*> jobs_of;
    if (q.links.empty()) {
      for (const auto& l : summary_.links) {
        const auto m = members.find(l.name);
        if (m == members.end()) continue;
        candidates.push_back({l.name, l.served_load, {}});
        jobs_of.push_back(&m->second);
      }
    } else {
      for (const auto& name : q.links) {
        const auto l = std::find_if(summary_.links.begin(), summary_.links.end(),
                                    [&](const LinkSchedule& x) { return x.name == name; });
        if (l == summary_.links.end()) {
          unknown_link = name;
          return std::nullopt;
        }
        const auto m = members.find(l->name);
        if (m == members.end()) continue;
        candidates.push_back({l->name, l->served_load, {}});
        jobs_of.push_back(&m->second);
      }
    }
    for (const auto& l : summary_.links) links_total += members.count(l.name);
    // The busiest first (planned utilization, then the most jobs), unless named.
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const size_t keep = q.links.empty() ? std::min(q.max_links, order.size()) : order.size();
    if (q.links.empty()) {
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep),
                        order.end(), [&](size_t a, size_t b) {
                          if (candidates[a].served_load != candidates[b].served_load) {
                            return candidates[a].served_load > candidates[b].served_load;
                          }
                          if (jobs_of[a]->size() != jobs_of[b]->size()) {
                            return jobs_of[a]->size() > jobs_of[b]->size();
                          }
                          return candidates[a].link < candidates[b].link;
                        });
    }
    std::unordered_map<const JobState*, size_t> row_of;
    for (size_t k = 0; k < keep; ++k) {
      Lane& lane = lanes.emplace_back(std::move(candidates[order[k]]));
      for (const JobState* job : *jobs_of[order[k]]) {
        const auto [it, added] = row_of.try_emplace(job, rows.size());
        if (added) {
          JobRow& row = rows.emplace_back(RowOf(*job));
          for (const auto& p : job->phases) {
            if (p.start_ns + p.duration_ns >= now - q.span_ns) row.phases.push_back(p);
          }
        }
        lane.rows.push_back(it->second);
      }
    }
    measured = MeasuredUtilizations();
  }
  json links = json::array();
  for (const Lane& lane : lanes) {
    json jobs = json::array();
    for (const size_t r : lane.rows) {
      const JobRow& job = rows[r];
      json entry{{"job", job.name},        {"priority", job.priority},
                 {"planned", job.planned}, {"best_effort", job.best_effort},
                 {"yields", job.yields},   {"yield_wait_ns", job.yield_wait_ns}};
      if (job.planned) entry["timetable"] = TimetableToJson(job, now);
      json phases = json::array();
      for (const auto& p : job.phases) phases.push_back({p.start_ns, p.duration_ns, p.late});
      entry["phases"] = phases;
      jobs.push_back(entry);
    }
    links.push_back({{"link", lane.link},
                     {"planned_utilization", lane.served_load},
                     {"measured_utilization", measured[lane.link]},
                     {"jobs", jobs}});
  }
  return json{{"now_ns", now},
              {"span_ns", q.span_ns},
              {"plan_version", plan_version},
              {"links_total", links_total},
              {"links", links}};
}

}  // namespace metronome::service
