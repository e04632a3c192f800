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
              {"allowance_ns", y.allowance_ns},
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
  uint64_t yields = 0;  // the collectives its ranks held for higher-ranked windows (cumulative)
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
  r.yields = job.yielded;
  r.yield_wait_ns = job.yield_wait_ns;
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
  const Tally t = Count();
  uint64_t plan_version = 0;
  int64_t last_plan_ns = 0;
  double utilization = 0.0, latency = 0.0, cushion_ns = 0.0;
  {
    std::lock_guard lock(mu_);
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
  // Copied under the lock, written out after it (every report and clock ping waits for it, and
  // a job may have tens of thousands of ranks).
  std::optional<JobRow> row;
  std::vector<std::pair<uint32_t, RankState>> rank_states;
  std::vector<std::string> decisions;
  {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(name);
    if (it == jobs_.end()) return std::nullopt;
    const JobState& job = it->second;
    row = RowOf(job);
    rank_states.assign(job.ranks.begin(), job.ranks.end());
    decisions = job.decisions;
  }
  json j = JobSummary(*row, RealtimeNs());
  json ranks = json::array();
  for (const auto& [r, rank] : rank_states) {
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
  j["decisions"] = decisions;
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
  std::vector<MeasuredPhase> phases;  // the last `limit`, copied under the lock
  {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(name);
    if (it == jobs_.end()) return std::nullopt;
    const auto& all = it->second.phases;
    const size_t from = all.size() > limit ? all.size() - limit : 0;
    phases.assign(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
  }
  json out = json::array();
  for (size_t i = 0; i < phases.size(); ++i) {
    out.push_back({{"start_ns", phases[i].start_ns},
                   {"duration_ns", phases[i].duration_ns},
                   {"lateness_ns", phases[i].lateness_ns},
                   {"late", phases[i].late}});
  }
  return json{{"job", name}, {"phases", out}};
}

std::optional<nlohmann::json> Registry::LinksJson(size_t limit, const std::string& after) {
  LinkLoads loads = CollectLinkLoads();
  // In the plan's order (the topology's: a rack's uplink, then its nodes'), which stays put for
  // the scheduler's life, so a page's last name says where the next begins.
  auto from = loads.links.begin();
  if (!after.empty()) {
    from = std::find_if(loads.links.begin(), loads.links.end(),
                        [&](const LinkSchedule& l) { return l.name == after; });
    if (from == loads.links.end()) return std::nullopt;
    ++from;
  }
  const size_t left = static_cast<size_t>(loads.links.end() - from);
  const auto to = from + static_cast<std::ptrdiff_t>(std::min(limit, left));
  json out = json::array();
  for (auto it = from; it != to; ++it) {
    const LinkSchedule& l = *it;
    out.push_back({{"link", l.name},
                   {"capacity_bytes_per_s", l.capacity_bytes_per_s},
                   {"hyperperiod_ns", l.hyperperiod_ns},
                   {"planned_utilization", l.served_load},
                   {"measured_utilization", loads.measured[l.name]},
                   {"min_cushion_ns", l.min_cushion_ns},
                   {"contention", l.contention},
                   {"gated_jobs", l.gated_jobs},
                   {"best_effort_jobs", l.best_effort_jobs},
                   {"jobs", loads.jobs[l.name]}});
  }
  json page{{"links", out}, {"total", loads.links.size()}};
  if (to != loads.links.end() && to != from) page["continue"] = (to - 1)->name;
  return page;
}

std::optional<nlohmann::json> Registry::TimelineJson(const TimelineQuery& q,
                                                     std::string& unknown_link) {
  const int64_t now = RealtimeNs();
  uint64_t plan_version = 0;
  {
    std::lock_guard lock(mu_);
    plan_version = plan_version_;
  }
  LinkLoads loads = CollectLinkLoads();
  struct Lane {
    std::string link;
    double served_load = 0.0;
    const std::vector<std::string>* jobs = nullptr;  // the link's, by name
    std::vector<size_t> rows;                        // into `rows`, those still registered
  };
  std::vector<Lane> candidates;
  const auto add = [&](const LinkSchedule& l) {
    const auto m = loads.jobs.find(l.name);
    if (m != loads.jobs.end()) candidates.push_back({l.name, l.served_load, &m->second, {}});
  };
  if (q.links.empty()) {
    for (const auto& l : loads.links) add(l);
  } else {
    for (const auto& name : q.links) {
      const auto l = std::find_if(loads.links.begin(), loads.links.end(),
                                  [&](const LinkSchedule& x) { return x.name == name; });
      if (l == loads.links.end()) {
        unknown_link = name;
        return std::nullopt;
      }
      add(*l);
    }
  }
  size_t links_total = 0;
  for (const auto& l : loads.links) links_total += loads.jobs.count(l.name);
  // The busiest first (planned utilization, then the most jobs), unless named.
  const size_t keep =
      q.links.empty() ? std::min(q.max_links, candidates.size()) : candidates.size();
  if (q.links.empty()) {
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates.end(), [](const Lane& a, const Lane& b) {
                        if (a.served_load != b.served_load) return a.served_load > b.served_load;
                        if (a.jobs->size() != b.jobs->size()) {
                          return a.jobs->size() > b.jobs->size();
                        }
                        return a.link < b.link;
                      });
  }
  std::vector<Lane> lanes(
      std::make_move_iterator(candidates.begin()),
      std::make_move_iterator(candidates.begin() + static_cast<std::ptrdiff_t>(keep)));
  // The rows of the lanes' jobs (the costly part: only for the links answered), a slice of
  // jobs under the lock at a time.
  std::vector<std::string> names;
  for (const Lane& lane : lanes) names.insert(names.end(), lane.jobs->begin(), lane.jobs->end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<JobRow> rows;
  std::unordered_map<std::string_view, size_t> row_of;
  for (size_t from = 0; from < names.size(); from += kJobsPerSlice) {
    std::lock_guard lock(mu_);
    for (size_t i = from; i < std::min(names.size(), from + kJobsPerSlice); ++i) {
      const auto job = jobs_.find(names[i]);
      if (job == jobs_.end()) continue;  // gone meanwhile
      JobRow& row = rows.emplace_back(RowOf(job->second));
      for (const auto& p : job->second.phases) {
        if (p.start_ns + p.duration_ns >= now - q.span_ns) row.phases.push_back(p);
      }
      row_of.emplace(names[i], rows.size() - 1);
    }
  }
  for (Lane& lane : lanes) {
    for (const auto& name : *lane.jobs) {
      const auto r = row_of.find(name);
      if (r != row_of.end()) lane.rows.push_back(r->second);
    }
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
                     {"measured_utilization", loads.measured[lane.link]},
                     {"jobs", jobs}});
  }
  return json{{"now_ns", now},
              {"span_ns", q.span_ns},
              {"plan_version", plan_version},
              {"links_total", links_total},
              {"links", links}};
}

}  // namespace metronome::service
