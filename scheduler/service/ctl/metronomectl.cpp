// metronomectl: the command-line client of metronome-scheduler's HTTP API.
//
//   metronomectl [--server URL] [--cacert CA [--cert CRT --key KEY]] [--json] COMMAND
//   COMMAND: status | jobs | links | timetable JOB |
//            plan --what-if --nodes N1,N2 --period-ms P --comm-ms C [--priority K] [--job NAME]
//
// Tables by default, the API's JSON with --json. Exit codes: 0 ok, 1 the server could not be
// reached or answered an error, 2 bad usage.
#include <httplib.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

struct Options {
  std::string server = "http://127.0.0.1:7412";
  bool json_output = false;
  int timeout_s = 5;
  int page_size = 500;  // jobs or links per request of `jobs` and `links`
  // HTTPS (a https:// server URL): the CA that signed the scheduler's certificate, and a client
  // certificate and key where the scheduler requires one (http.tls_client_ca_file).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

json Call(const Options& o, const std::string& method, const std::string& path,
          const std::string& body = "") {
  httplib::Client cli(o.server, o.cert_file, o.key_file);
  if (!cli.is_valid()) throw Failure("not a usable server URL: " + o.server);
  if (!o.ca_file.empty()) cli.set_ca_cert_path(o.ca_file);
  cli.set_connection_timeout(o.timeout_s, 0);
  cli.set_read_timeout(o.timeout_s, 0);
  auto res =
      method == "POST" ? cli.Post(path.c_str(), body, "application/json") : cli.Get(path.c_str());
  if (!res) {
    throw Failure("cannot reach " + o.server + path + ": " + httplib::to_string(res.error()));
  }
  json j = json::parse(res->body, nullptr, false);
  if (res->status >= 400) {
    std::string msg = j.is_object() ? j.value("message", res->body) : res->body;
    throw Failure(o.server + path + ": HTTP " + std::to_string(res->status) + ": " + msg);
  }
  if (j.is_discarded()) throw Failure(o.server + path + ": the answer is not JSON");
  return j;
}

// A plain text table: columns as wide as their widest cell.
void PrintTable(const std::vector<std::string>& head,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < head.size(); ++i) {
      std::string c = i < cells.size() ? cells[i] : "";
      if (i + 1 < head.size()) c.resize(w[i] + 2, ' ');
      out += c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::cout << out << "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
}

std::string Ms(const json& ns) {
  if (!ns.is_number()) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(3) << ns.get<double>() / 1e6;
  return s.str();
}

std::string Pct(const json& v) {
  if (!v.is_number()) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << v.get<double>() * 100 << "%";
  return s.str();
}

std::string Num(const json& v, int digits = 3) {
  if (!v.is_number()) return "-";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v.get<double>();
  return s.str();
}

std::string Join(const json& list) {
  std::string out;
  for (const auto& e : list) out += (out.empty() ? "" : ",") + e.get<std::string>();
  return out.empty() ? "-" : out;
}

// Percent-encodes everything but unreserved characters (RFC 3986): a path segment or a query
// value.
std::string PercentEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

int Status(const Options& o) {
  const json j = Call(o, "GET", "/api/v1/status");
  if (o.json_output) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  PrintTable({"FIELD", "VALUE"},
             {{"status", j.value("status", "?")},
              {"uptime", Num(j["uptime_s"], 1) + " s"},
              {"zmq endpoint", j.value("zmq_endpoint", "?")},
              {"curve", j.value("curve", false) ? "on" : "off"},
              {"jobs", Num(j["jobs"]) + " (" + Num(j["jobs_planned"]) + " planned, " +
                           Num(j["jobs_best_effort"]) + " best-effort)"},
              {"ranks", Num(j["ranks"])},
              {"clients", Num(j["clients"])},
              {"links", Num(j["links"])},
              {"plan version", Num(j["plan_version"])},
              {"replans", Num(j["replans"], 0)},
              {"rejected messages", Num(j["rejected_messages"], 0)}});
  return 0;
}

// Every item of a paged list (/api/v1/jobs, /api/v1/links: a page is 500 unless asked for more),
// page by page: {"<what>": [...], "total": n}.
json AllPages(const Options& o, const std::string& what) {
  const std::string path = "/api/v1/" + what;
  const std::string where = o.server + path;
  json items = json::array();
  std::string after;
  std::set<std::string> cursors;
  for (;;) {
    const json page = Call(o, "GET",
                           path + "?limit=" + std::to_string(o.page_size) +
                               (after.empty() ? "" : "&continue=" + PercentEncode(after)));
    if (!page.contains(what) || !page[what].is_array()) {
      std::string message = where;
      message += ": no list of ";
      message += what;
      throw Failure(message + " in the answer");
    }
    for (const auto& item : page[what]) items.push_back(item);
    if (!page.contains("continue") || !page["continue"].is_string()) break;
    std::string next = page["continue"].get<std::string>();
    // A cursor seen before, or more pages than the total needs, would never end the loop.
    const size_t total = page.value("total", size_t{0});
    if (!cursors.insert(next).second || cursors.size() > total / std::max(o.page_size, 1) + 1) {
      throw Failure(where + ": the pages do not advance");
    }
    after = std::move(next);
  }
  const size_t total = items.size();
  return json{{what, std::move(items)}, {"total", total}};
}

int Jobs(const Options& o) {
  const json j = AllPages(o, "jobs");
  if (o.json_output) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& job : j["jobs"]) {
    const json& p = job["profile"];
    const json& t = job["timetable"];
    rows.push_back(
        {job.value("job", "?"), Num(job["priority"]),
         Num(job["ranks"]) + "/" + Num(job["world_size"]), p.is_object() ? Ms(p["period_ns"]) : "-",
         p.is_object() ? Ms(p["comm_ns"]) : "-",
         !job.value("planned", false)                 ? "unplanned"
         : (t.is_object() && !t.value("gated", true)) ? "not gated"
         : job.value("best_effort", false)            ? "best-effort"
                                                      : "gated",
         t.is_object() ? Ms(t["period_ns"]) : "-", t.is_object() ? Ms(t["offset_ns"]) : "-",
         t.is_object() ? Ms(t["late_slack_ns"]) : "-", Pct(job["predicted_slowdown"]),
         Ms(job["lateness_ewma_ns"]), Join(job["links"])});
  }
  PrintTable({"JOB", "PRIO", "RANKS", "P(ms)", "C(ms)", "STATE", "T(ms)", "OFFSET(ms)", "SLACK(ms)",
              "SLOWDOWN", "LATE(ms)", "LINKS"},
             rows);
  return 0;
}

int Links(const Options& o) {
  const json j = AllPages(o, "links");
  if (o.json_output) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& l : j["links"]) {
    rows.push_back({l.value("link", "?"), Num(l["capacity_bytes_per_s"].get<double>() * 8 / 1e9, 1),
                    Pct(l["planned_utilization"]), Pct(l["measured_utilization"]),
                    Ms(l["hyperperiod_ns"]), Ms(l["min_cushion_ns"]), Num(l["gated_jobs"]),
                    Num(l["best_effort_jobs"]), Join(l["jobs"])});
  }
  PrintTable({"LINK", "GBIT/S", "PLANNED", "MEASURED", "HYPER(ms)", "CUSHION(ms)", "GATED",
              "BEST-EFFORT", "JOBS"},
             rows);
  return 0;
}

int TimetableCmd(const Options& o, const std::string& job) {
  const json j = Call(o, "GET", "/api/v1/jobs/" + PercentEncode(job) + "/timetable");
  if (o.json_output) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  PrintTable({"FIELD", "VALUE"}, {{"job", j.value("job", "?")},
                                  {"version", Num(j["version"])},
                                  {"state", !j.value("gated", true) ? "not gated (always open)"
                                            : j.value("best_effort", false) ? "best-effort"
                                                                            : "gated"},
                                  {"epoch_ns", Num(j["epoch_ns"])},
                                  {"period (ms)", Ms(j["period_ns"])},
                                  {"offset (ms)", Ms(j["offset_ns"])},
                                  {"window (ms)", Ms(j["window_ns"])},
                                  {"late slack (ms)", Ms(j["late_slack_ns"])},
                                  {"max wait (ms)", Ms(j["max_wait_ns"])},
                                  {"next window (ns)", Num(j["next_window_ns"])}});
  return 0;
}

int WhatIf(const Options& o, const json& request) {
  const json j = Call(o, "POST", "/api/v1/plan/what-if", request.dump());
  if (o.json_output) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "job " << j.value("job", "?") << " would cross: " << Join(j["links"]) << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : j["jobs"]) {
    rows.push_back({e.value("job", "?"), e.value("candidate", false) ? "new" : "running",
                    e.value("candidate", false) ? "-" : Pct(e["slowdown_now"]),
                    Pct(e["slowdown_after"]),
                    e.value("candidate", false)
                        ? (e.value("best_effort_after", false) ? "best-effort" : "gated")
                        : ""});
  }
  PrintTable({"JOB", "KIND", "SLOWDOWN NOW", "SLOWDOWN AFTER", "STATE"}, rows);
  return 0;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Run(int argc, char** argv) {
  Options o;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts.
  if (const char* env = std::getenv("METRONOME_HTTP")) o.server = env;
  CLI::App app{"metronomectl: inspect metronome-scheduler through its HTTP API"};
  app.add_option("-s,--server", o.server,
                 "scheduler HTTP base URL [http://127.0.0.1:7412, or $METRONOME_HTTP]");
  app.add_flag("--json", o.json_output, "print the API's JSON instead of a table");
  app.add_option("--cacert", o.ca_file, "HTTPS: CA certificate (PEM) that signed the server's")
      ->check(CLI::ExistingFile);
  auto* cert = app.add_option("--cert", o.cert_file, "HTTPS: client certificate (PEM)")
                   ->check(CLI::ExistingFile);
  auto* key =
      app.add_option("--key", o.key_file, "HTTPS: its private key (PEM)")->check(CLI::ExistingFile);
  cert->needs(key);
  key->needs(cert);
  app.add_option("--timeout", o.timeout_s, "seconds to wait for the server [5]")
      ->check(CLI::Range(1, 600));
  app.add_option("--page-size", o.page_size, "jobs or links asked for in one request [500]")
      ->check(CLI::Range(1, 10'000));
  app.require_subcommand(1);
  auto* status = app.add_subcommand("status", "the scheduler's state at a glance");
  auto* jobs = app.add_subcommand("jobs", "registered jobs, their profiles and timetables");
  auto* links = app.add_subcommand("links", "links: planned and measured utilization, jobs");
  auto* timetable = app.add_subcommand("timetable", "one job's timetable");
  std::string job;
  timetable->add_option("JOB", job, "job id")->required();
  auto* plan = app.add_subcommand("plan", "ask the planner (nothing is changed)");
  bool what_if = false;
  std::string wi_job = "what-if", nodes;
  double period_ms = 0, comm_ms = 0;
  int priority = 1;
  double bytes = 0;
  plan->add_flag("--what-if", what_if, "predict slowdowns if a job joined on --nodes")->required();
  plan->add_option("--job", wi_job, "a name for the hypothetical job");
  plan->add_option("--nodes", nodes, "comma-separated node names of its ranks")->required();
  plan->add_option("--period-ms", period_ms, "its natural iteration period")->required();
  plan->add_option("--comm-ms", comm_ms, "its communication phase")->required();
  plan->add_option("--priority", priority, "its priority [1]");
  plan->add_option("--bytes-per-phase", bytes, "bytes per communication phase [saturating]");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  while (!o.server.empty() && o.server.back() == '/') o.server.pop_back();
  try {
    if (*status) return Status(o);
    if (*jobs) return Jobs(o);
    if (*links) return Links(o);
    if (*timetable) return TimetableCmd(o, job);
    if (*plan) {
      json req{{"job", wi_job},
               {"nodes", Split(nodes)},
               {"period_ms", period_ms},
               {"comm_ms", comm_ms},
               {"priority", priority}};
      if (bytes > 0) req["bytes_per_phase"] = bytes;
      return WhatIf(o, req);
    }
  } catch (const Failure& e) {
    std::fprintf(stderr, "metronomectl: %s\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace

// Run's error paths return their exit codes; anything else thrown ends the program here with 1
// (instead of std::terminate).
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metronomectl: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "metronomectl: unknown exception\n");
  }
  return 1;
}
