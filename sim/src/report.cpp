#include "metronome/sim/report.hpp"

#include <cstdio>
#include <map>
#include <string>

namespace metronome::sim {

namespace {

struct ClassStats {
  int jobs = 0;
  double slowdown = 0.0;
  double jct = 0.0;
};

std::map<std::string, ClassStats> ByClass(const RunResult& run) {
  std::map<std::string, ClassStats> m;
  for (const JobResult& j : run.jobs) {
    ClassStats& c = m[PriorityClass(j.priority)];
    ++c.jobs;
    c.slowdown += j.slowdown;
    c.jct += j.jct_s;
  }
  for (auto& [k, c] : m) {
    c.slowdown /= c.jobs;
    c.jct /= c.jobs;
  }
  return m;
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

nlohmann::json ToJson(const RunResult& run, bool with_links) {
  nlohmann::json j;
  j["policy"] = run.policy;
  if (!run.scenario.empty()) j["scenario"] = run.scenario;
  nlohmann::json jobs = nlohmann::json::array();
  for (const JobResult& r : run.jobs) {
    jobs.push_back({{"name", r.name},
                    {"model", r.model},
                    {"priority", r.priority},
                    {"priority_class", PriorityClass(r.priority)},
                    {"gpus", r.gpus},
                    {"iterations", r.iterations},
                    {"nodes", r.nodes_used},
                    {"links_crossed", r.links_crossed},
                    {"arrival_s", r.arrival_s},
                    {"start_s", r.start_s},
                    {"finish_s", r.finish_s},
                    {"jct_s", r.jct_s},
                    {"mean_iteration_ms", r.mean_iteration_ms},
                    {"natural_ms", r.natural_ms},
                    {"slowdown", r.slowdown},
                    {"comm_ms", r.comm_ms},
                    {"gate_wait_ms", r.gate_wait_ms},
                    {"fail_opens", r.fail_opens},
                    {"yields", r.yields},
                    {"yield_wait_ms", r.yield_wait_ms},
                    {"best_effort", r.best_effort},
                    {"mean_period_ms", r.mean_period_ms},
                    {"gated_fraction", r.gated_fraction},
                    {"period_ms", r.period_ms},
                    {"window_ms", r.window_ms},
                    {"late_slack_ms", r.late_slack_ms}});
  }
  if (with_links) {
    for (std::size_t i = 0; i < run.jobs.size(); ++i) jobs[i]["links"] = run.jobs[i].links;
  }
  j["jobs"] = std::move(jobs);
  j["summary"] = {{"avg_jct_s", run.summary.avg_jct_s},
                  {"weighted_jct_s", run.summary.weighted_jct_s},
                  {"avg_link_utilization", run.summary.avg_link_utilization},
                  {"makespan_s", run.summary.makespan_s},
                  {"avg_slowdown", run.summary.avg_slowdown},
                  {"overlap_fraction", run.summary.overlap_fraction},
                  {"links_with_traffic", run.links.size()},
                  {"events", run.summary.events},
                  {"wall_s", run.summary.wall_s}};
  nlohmann::json classes = nlohmann::json::object();
  for (const auto& [k, c] : ByClass(run)) {
    classes[k] = {{"jobs", c.jobs}, {"mean_slowdown", c.slowdown}, {"mean_jct_s", c.jct}};
  }
  j["by_priority"] = std::move(classes);
  j["scheduler"] = {{"plans", run.scheduler.plans},
                    {"adds", run.scheduler.adds},
                    {"removes", run.scheduler.removes},
                    {"controller_replans", run.scheduler.controller_replans},
                    {"overrun_replans", run.scheduler.overrun_replans},
                    {"overrun_refused", run.scheduler.overrun_refused},
                    {"overrun_deferred", run.scheduler.overrun_deferred},
                    {"offline_runs", run.scheduler.offline_runs},
                    {"offline_adopted", run.scheduler.offline_adopted},
                    {"placements_scored", run.scheduler.placements_scored},
                    {"placements_refused", run.scheduler.placements_refused},
                    {"planner_seconds", run.scheduler.planner_seconds}};
  if (with_links) {
    nlohmann::json links = nlohmann::json::array();
    for (const LinkResult& l : run.links) {
      links.push_back({{"name", l.name},
                       {"capacity_gbps", l.capacity_gbps},
                       {"bytes", l.bytes},
                       {"busy_s", l.busy_s},
                       {"utilization", l.utilization},
                       {"overlap_s", l.overlap_s}});
    }
    j["links"] = std::move(links);
  }
  return j;
}

nlohmann::json CompareJson(const std::vector<RunResult>& runs, bool with_links) {
  nlohmann::json j;
  if (!runs.empty()) {
    j["scenario"] = runs.front().scenario;
    j["baseline"] = runs.front().policy;
  }
  nlohmann::json arr = nlohmann::json::array();
  nlohmann::json ratios = nlohmann::json::object();
  for (const RunResult& r : runs) {
    arr.push_back(ToJson(r, with_links));
    const Summary& b = runs.front().summary;
    ratios[r.policy] = {
        {"avg_jct_s", r.summary.avg_jct_s / b.avg_jct_s},
        {"weighted_jct_s", r.summary.weighted_jct_s / b.weighted_jct_s},
        {"avg_link_utilization", b.avg_link_utilization > 0
                                     ? r.summary.avg_link_utilization / b.avg_link_utilization
                                     : 0.0},
        {"makespan_s", r.summary.makespan_s / b.makespan_s}};
  }
  j["runs"] = std::move(arr);
  j["ratios"] = std::move(ratios);
  return j;
}

void PrintTable(std::ostream& out, const RunResult& run) {
  out << "policy: " << run.policy << (run.scenario.empty() ? "" : "   scenario: " + run.scenario)
      << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %5s %-7s %10s %12s %11s %9s %9s\n", "job", "gpus", "prio",
                "jct_s", "iter_ms", "natural_ms", "slowdown", "gate_ms");
  out << line;
  for (const JobResult& j : run.jobs) {
    std::snprintf(line, sizeof line, "%-24.24s %5d %-7s %10.2f %12.2f %11.2f %9.3f %9.2f%s\n",
                  j.name.c_str(), j.gpus, PriorityClass(j.priority).c_str(), j.jct_s,
                  j.mean_iteration_ms, j.natural_ms, j.slowdown, j.gate_wait_ms,
                  j.best_effort ? "  (best-effort)" : "");
    out << line;
  }
  const Summary& s = run.summary;
  out << "\n";
  std::snprintf(line, sizeof line,
                "avg JCT %.2f s   weighted JCT %.2f s   avg link utilization %.1f %% (%zu links)   "
                "makespan %.2f s\n",
                s.avg_jct_s, s.weighted_jct_s, 100.0 * s.avg_link_utilization, run.links.size(),
                s.makespan_s);
  out << line;
  for (const auto& [k, c] : ByClass(run)) {
    std::snprintf(line, sizeof line, "  %-7s %4d jobs   mean slowdown %.3f   mean JCT %.2f s\n",
                  k.c_str(), c.jobs, c.slowdown, c.jct);
    out << line;
  }
  std::snprintf(line, sizeof line, "simulated %llu events in %.2f s\n",
                static_cast<unsigned long long>(s.events), s.wall_s);
  out << line;
}

void PrintCompare(std::ostream& out, const std::vector<RunResult>& runs) {
  if (runs.empty()) return;
  const RunResult& base = runs.front();
  if (!base.scenario.empty()) out << "scenario: " << base.scenario << "\n";
  out << "ratios are against " << base.policy << "\n\n";
  struct Metric {
    const char* name;
    double (*get)(const RunResult&);
    const char* fmt;
  };
  const Metric metrics[] = {
      {"avg JCT (s)", [](const RunResult& r) { return r.summary.avg_jct_s; }, "%.2f"},
      {"weighted JCT (s)", [](const RunResult& r) { return r.summary.weighted_jct_s; }, "%.2f"},
      {"avg link util (%)",
       [](const RunResult& r) { return 100.0 * r.summary.avg_link_utilization; }, "%.1f"},
      {"makespan (s)", [](const RunResult& r) { return r.summary.makespan_s; }, "%.2f"},
      {"avg slowdown", [](const RunResult& r) { return r.summary.avg_slowdown; }, "%.3f"},
      {"overlap (%)", [](const RunResult& r) { return 100.0 * r.summary.overlap_fraction; },
       "%.1f"},
  };
  char cell[64];
  std::snprintf(cell, sizeof cell, "%-20s", "");
  out << cell;
  for (const RunResult& r : runs) {
    std::snprintf(cell, sizeof cell, " %24.24s", r.policy.c_str());
    out << cell;
  }
  out << "\n";
  for (const Metric& m : metrics) {
    std::snprintf(cell, sizeof cell, "%-20s", m.name);
    out << cell;
    const double b = m.get(base);
    for (const RunResult& r : runs) {
      const double v = m.get(r);
      std::string shown = Fmt(m.fmt, v);  // "value (xratio)"
      shown += " (";
      shown += b != 0 ? Fmt("x%.3f", v / b) : std::string("-");
      shown += ")";
      std::snprintf(cell, sizeof cell, " %24s", shown.c_str());
      out << cell;
    }
    out << "\n";
  }
  // Slowdown by priority class.
  std::map<std::string, std::vector<double>> classes;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto& [k, c] : ByClass(runs[i])) {
      auto& v = classes[k];
      v.resize(runs.size(), 0.0);
      v[i] = c.slowdown;
    }
  }
  for (const auto& [k, v] : classes) {
    std::snprintf(cell, sizeof cell, "%-20s", ("slowdown " + k).c_str());
    out << cell;
    for (double x : v) {
      std::snprintf(cell, sizeof cell, " %24.3f", x);
      out << cell;
    }
    out << "\n";
  }
}

}  // namespace metronome::sim
