// The scheduler's HTTP side and command line: malformed requests at every route (answered with
// a JSON 4xx and counted, the server keeps serving), the status API's content, metronomectl,
// and the configuration (defaults, YAML file, flags, errors that name the key, --help).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "harness.hpp"
#include "metronome/common/clock.hpp"

namespace metronome::testing {
namespace {

bool PortFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

struct Reply {
  int status = 0;
  std::string body;
};

Reply Send(int port, const std::string& method, const std::string& path, const std::string& body,
           const std::string& content_type = "application/json") {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(5, 0);
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.body = body;
  if (!body.empty()) req.set_header("Content-Type", content_type);
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  if (!c.send(req, res, err)) return {-1, httplib::to_string(err)};
  return {res.status, res.body};
}

// Two planned jobs on the default link.
void StartCluster(zmq::context_t& ctx, const Scheduler& s,
                  std::vector<std::unique_ptr<ProtoClient>>& clients) {
  const std::vector<std::pair<std::string, std::string>> ranks = {
      {"job-a", "n0"}, {"job-a", "n1"}, {"job-b", "n2"}, {"job-b", "n3"}};
  for (size_t i = 0; i < ranks.size(); ++i) {
    clients.push_back(std::make_unique<ProtoClient>(ctx, s.Endpoint()));
    ASSERT_TRUE(clients.back()->Register(ranks[i].first, static_cast<uint32_t>(i % 2), 2,
                                         ranks[i].second, i < 2 ? 2 : 1));
  }
  clients[0]->Send(clients[0]->MakeReport("job-a", 0, 100 * kMs, 30 * kMs));
  clients[2]->Send(clients[2]->MakeReport("job-b", 0, 200 * kMs, 50 * kMs));
  ASSERT_TRUE(clients[0]->Expect<proto::TimetablePush>());
  ASSERT_TRUE(clients[2]->Expect<proto::TimetablePush>());
}

TEST(SchedulerHttp, MalformedRequestsAtEveryRouteAreRejectedAndCounted) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  std::vector<std::unique_ptr<ProtoClient>> clients;
  StartCluster(ctx, s, clients);

  const std::vector<std::string> get_routes = {"/healthz",
                                               "/metrics",
                                               "/api/v1/status",
                                               "/api/v1/jobs",
                                               "/api/v1/jobs/job-a",
                                               "/api/v1/jobs/job-a/timetable",
                                               "/api/v1/jobs/job-a/phases",
                                               "/api/v1/links",
                                               "/api/v1/timeline",
                                               "/",
                                               "/timeline"};
  int bad = 0;
  auto expect_json_error = [&](const Reply& r, int status, const std::string& what) {
    ++bad;
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << what << ": error body is not JSON: " << r.body;
    EXPECT_TRUE(j.contains("error") && j.contains("message")) << what << ": " << r.body;
  };
  for (const auto& route : get_routes) {
    EXPECT_EQ(Send(s.HttpPort(), "GET", route, "").status, 200) << route;
    expect_json_error(Send(s.HttpPort(), "GET", route, "{\"x\":"), 400, "GET+body " + route);
    expect_json_error(Send(s.HttpPort(), "POST", route, "\x01\x02garbage", "text/plain"), 405,
                      "POST " + route);
    expect_json_error(Send(s.HttpPort(), "PUT", route, "{}"), 405, "PUT " + route);
  }
  const std::string wi = "/api/v1/plan/what-if";
  const std::vector<std::string> bad_bodies = {
      "",
      "{not json",
      "[1,2,3]",
      "\"string\"",
      "{}",
      R"({"nodes": "n0", "period_ms": 100, "comm_ms": 10})",
      R"({"nodes": [], "period_ms": 100, "comm_ms": 10})",
      R"({"nodes": [1, 2], "period_ms": 100, "comm_ms": 10})",
      R"({"nodes": ["n0", "n1"], "period_ms": "100", "comm_ms": 10})",
      R"({"nodes": ["n0", "n1"], "period_ms": -5, "comm_ms": 10})",
      R"({"nodes": ["n0", "n1"], "period_ms": 100, "comm_ms": 200})",
      R"({"nodes": ["n0", "n1"], "period_ms": 100, "comm_ms": 10, "priority": "high"})",
      R"({"job": 7, "nodes": ["n0", "n1"], "period_ms": 100, "comm_ms": 10})",
      std::string("{\"nodes\": [\"\xff\xfe\"], \"period_ms\": 1e400}"),
  };
  for (const auto& body : bad_bodies) {
    expect_json_error(Send(s.HttpPort(), "POST", wi, body), 400, "what-if body " + body);
  }
  expect_json_error(Send(s.HttpPort(), "GET", wi, ""), 405, "GET what-if");
  expect_json_error(Send(s.HttpPort(), "POST", wi, std::string(2 << 20, '{')), 413, "huge body");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs/job-a/phases?limit=abc", ""), 400,
                    "phases limit");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs/job-a/phases?limit=0", ""), 400,
                    "phases limit 0");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/timeline?span_ms=-1", ""), 400,
                    "timeline span");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs?limit=0", ""), 400, "jobs limit 0");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs?limit=10001", ""), 400,
                    "jobs limit too large");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs?continue=" + std::string(300, 'x'), ""),
                    400, "jobs continue too long");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs/nobody", ""), 404, "unknown job");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/jobs/nobody/timetable", ""), 404,
                    "unknown job timetable");
  expect_json_error(Send(s.HttpPort(), "GET", "/api/v1/nothing-here", ""), 404, "no route");
  expect_json_error(Send(s.HttpPort(), "GET", "/extender/filter", ""), 405, "GET extender");

  // Still serving, and every rejection counted.
  ASSERT_TRUE(s.Get("/healthz"));
  const std::string m = s.Metrics();
  EXPECT_EQ(MetricSum(m, "metronome_http_rejected_total"), bad);
  EXPECT_GE(MetricValue(m, "metronome_http_rejected_total{reason=\"bad_json\",route=\"what_if\"}"),
            2);
  EXPECT_EQ(MetricValue(
                m, "metronome_http_rejected_total{reason=\"body_too_large\",route=\"unmatched\"}"),
            1);
  EXPECT_GT(MetricValue(m, "metronome_http_request_duration_seconds_count{route=\"jobs\"}"), 0);
  // A valid what-if still works.
  const Reply ok =
      Send(s.HttpPort(), "POST", wi,
           R"({"job": "new", "nodes": ["n4", "n5"], "period_ms": 100, "comm_ms": 20})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(SchedulerHttp, AClientOverItsRateIsAnswered429OnEveryRouteAndCounted) {
  const std::string cfg = TempPath("rate-limit.yaml");
  WriteFile(cfg, "http:\n  address: 127.0.0.1:1\n  rate_limit: 5\n");  // --http overrides it
  Scheduler s({"--config", cfg});
  ASSERT_TRUE(s.Ready()) << s.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // a full bucket: 10
  int served = 0;
  int limited = 0;
  int unmatched_limited = 0;
  for (int i = 0; i < 30; ++i) {
    const bool unmatched = i % 3 == 2;
    const Reply r = Send(s.HttpPort(), "GET", unmatched ? "/no-such-route" : "/healthz", "");
    if (r.status == 429) {
      ++limited;
      unmatched_limited += unmatched ? 1 : 0;
      EXPECT_NE(r.body.find("\"rate_limited\""), std::string::npos) << r.body;
    } else {
      served += 1;
      EXPECT_EQ(r.status, unmatched ? 404 : 200) << r.body;
    }
  }
  // Thirty requests in far less than the four seconds that would refill 20 tokens.
  EXPECT_GE(served, 10) << "the burst passes";
  EXPECT_GE(limited, 5);
  EXPECT_GE(unmatched_limited, 1) << "routes no handler matches are limited too";
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::string metrics = s.Metrics();
  const auto line = metrics.find("metronome_http_rejected_total{");
  bool counted = false;
  for (size_t at = line; at != std::string::npos;
       at = metrics.find("metronome_http_rejected_total{", at + 1)) {
    const std::string l = metrics.substr(at, metrics.find('\n', at) - at);
    if (l.find("route=\"rate_limited\"") != std::string::npos) {
      counted = true;
      EXPECT_NE(l.find(" " + std::to_string(limited)), std::string::npos) << l;
    }
  }
  EXPECT_TRUE(counted) << metrics;
}

TEST(SchedulerHttp, StatusApiAndMetricsDescribeTheCluster) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  std::vector<std::unique_ptr<ProtoClient>> clients;
  StartCluster(ctx, s, clients);
  auto status = s.Get("/api/v1/status");
  ASSERT_TRUE(status);
  EXPECT_EQ((*status)["jobs"], 2);
  EXPECT_EQ((*status)["jobs_planned"], 2);
  EXPECT_EQ((*status)["ranks"], 4);
  auto tt = s.Get("/api/v1/jobs/job-b/timetable");
  ASSERT_TRUE(tt);
  EXPECT_EQ((*tt)["window_ns"], 50 * kMs);
  EXPECT_GE((*tt)["period_ns"].get<int64_t>(), 200 * kMs);
  // The jobs in pages, in name order: a page says where the next starts while more remain.
  auto all = s.Get("/api/v1/jobs");
  ASSERT_TRUE(all);
  EXPECT_EQ((*all)["total"], 2);
  EXPECT_EQ((*all)["jobs"].size(), 2u);
  EXPECT_FALSE(all->contains("continue"));
  auto first = s.Get("/api/v1/jobs?limit=1");
  ASSERT_TRUE(first);
  ASSERT_EQ((*first)["jobs"].size(), 1u);
  EXPECT_EQ((*first)["jobs"][0]["job"], "job-a");
  EXPECT_EQ((*first)["continue"], "job-a");
  EXPECT_EQ((*first)["total"], 2);
  auto second = s.Get("/api/v1/jobs?limit=1&continue=job-a");
  ASSERT_TRUE(second);
  ASSERT_EQ((*second)["jobs"].size(), 1u);
  EXPECT_EQ((*second)["jobs"][0]["job"], "job-b");
  EXPECT_FALSE(second->contains("continue"));
  auto past = s.Get("/api/v1/jobs?continue=job-b");
  ASSERT_TRUE(past);
  EXPECT_TRUE((*past)["jobs"].empty());
  auto timeline = s.Get("/api/v1/timeline?span_ms=2000");
  ASSERT_TRUE(timeline);
  ASSERT_EQ((*timeline)["links"].size(), 1u);
  EXPECT_EQ((*timeline)["links"][0]["jobs"].size(), 2u);
  const std::string m = s.Metrics();
  EXPECT_EQ(MetricValue(m, "metronome_jobs"), 2);
  EXPECT_EQ(MetricValue(m, "metronome_links"), 1);
  // Planned: the windows over the planned periods (a small margin above the natural ones).
  const double planned = MetricValue(m, "metronome_link_planned_utilization{link=\"default\"}");
  EXPECT_GT(planned, 0.5);
  EXPECT_LE(planned, 0.55 + 1e-9);
  EXPECT_NEAR(MetricValue(m, "metronome_link_measured_utilization{link=\"default\"}"), 0.55, 1e-6);
  EXPECT_GE(MetricValue(m, "metronome_timetable_push_latency_seconds_count"), 4);
  EXPECT_GE(MetricValue(m, "metronome_plan_duration_seconds_count"), 1);
}

// A job's holds for higher-ranked windows are counted per job from its ranks' cumulative
// counters, and never fall: a shim that restarts counts from 0 again, the holds before stay.
TEST(SchedulerHttp, MetricsCountEachJobsYieldsAndEachLinksJobs) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  std::vector<std::unique_ptr<ProtoClient>> clients;
  StartCluster(ctx, s, clients);
  ProtoClient& b0 = *clients[2];
  const auto report = [&](uint64_t yielded, int64_t wait_ms) {
    proto::ProfileReport r = b0.MakeReport("job-b", 0, 200 * kMs, 50 * kMs);
    r.yielded = yielded;
    r.yield_wait_ns = wait_ms * kMs;
    b0.Send(r);
  };
  report(3, 40);
  report(5, 60);  // +2, +20 ms
  report(1, 5);   // the shim restarted: nothing new yet
  report(2, 15);  // +1, +10 ms
  std::string m;
  ASSERT_TRUE(WaitFor([&] {
    m = s.Metrics();
    return MetricValue(m, "metronome_job_yields_total{job=\"job-b\"}") == 6;
  })) << m;
  EXPECT_NEAR(MetricValue(m, "metronome_job_yield_wait_seconds_total{job=\"job-b\"}"), 0.070, 1e-9);
  EXPECT_EQ(MetricValue(m, "metronome_job_yields_total{job=\"job-a\"}"), -1);  // none: no series
  EXPECT_EQ(MetricValue(m, "metronome_link_jobs{link=\"default\"}"), 2);
  EXPECT_EQ(MetricValue(m, "metronome_ranks"), 4);
  auto job = s.Get("/api/v1/jobs/job-b");
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["yields"], 6) << job->dump();
  EXPECT_EQ((*job)["yield_wait_ns"], 70 * kMs) << job->dump();
}

TEST(SchedulerHttp, TimelineAnswersTheBusiestLinksOrTheLinksNamed) {
  const std::string topo = TwoRackTopology("timeline-links-topo.yaml");
  Scheduler s({"--topology", topo});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  std::vector<std::unique_ptr<ProtoClient>> clients;
  // job-a within rack r0 (n0, n1); job-b across the racks (n0, n2).
  const std::vector<std::tuple<std::string, uint32_t, std::string>> ranks = {
      {"job-a", 0, "n0"}, {"job-a", 1, "n1"}, {"job-b", 0, "n0"}, {"job-b", 1, "n2"}};
  for (const auto& [job, rank, node] : ranks) {
    clients.push_back(std::make_unique<ProtoClient>(ctx, s.Endpoint()));
    ASSERT_TRUE(clients.back()->Register(job, rank, 2, node));
  }
  clients[0]->Send(clients[0]->MakeReport("job-a", 0, 100 * kMs, 30 * kMs));
  clients[2]->Send(clients[2]->MakeReport("job-b", 0, 200 * kMs, 50 * kMs));
  ASSERT_TRUE(clients[0]->Expect<proto::TimetablePush>());
  ASSERT_TRUE(clients[2]->Expect<proto::TimetablePush>());
  auto names = [](const json& t) {
    std::vector<std::string> out;
    for (const auto& l : t["links"]) out.push_back(l["link"].get<std::string>());
    return out;
  };
  auto all = s.Get("/api/v1/timeline");
  ASSERT_TRUE(all);
  EXPECT_EQ((*all)["links_total"], 5);  // three nodes' uplinks and the two racks'
  EXPECT_EQ(names(*all).size(), 5u);
  // The busiest first (planned utilization, then the most jobs): each answer a prefix of the
  // whole list, in order.
  double last = 2.0;
  size_t last_jobs = 0;
  for (const auto& l : (*all)["links"]) {
    const double u = l["planned_utilization"].get<double>();
    EXPECT_TRUE(u < last || (u == last && l["jobs"].size() <= last_jobs)) << all->dump();
    last = u;
    last_jobs = l["jobs"].size();
  }
  auto top = s.Get("/api/v1/timeline?links=2");
  ASSERT_TRUE(top);
  EXPECT_EQ((*top)["links_total"], 5);
  const auto busiest = names(*top);
  ASSERT_EQ(busiest.size(), 2u);
  EXPECT_EQ(busiest, (std::vector<std::string>{names(*all)[0], names(*all)[1]}));
  // Named links, in the order asked for, whatever their load.
  auto named = s.Get("/api/v1/timeline?link=n1/up&link=r1/up");
  ASSERT_TRUE(named);
  EXPECT_EQ(names(*named), (std::vector<std::string>{"n1/up", "r1/up"}));
  EXPECT_EQ((*named)["links"][0]["jobs"][0]["job"], "job-a");
  EXPECT_EQ((*named)["links"][1]["jobs"][0]["job"], "job-b");
  auto idle = s.Get("/api/v1/timeline?link=n3/up");  // in the plan, no job on it
  ASSERT_TRUE(idle);
  EXPECT_TRUE((*idle)["links"].empty());
  // Bad queries: clear errors.
  for (const std::string q : {"links=0", "links=abc", "links=100000", "link="}) {
    const Reply r = Send(s.HttpPort(), "GET", "/api/v1/timeline?" + q, "");
    EXPECT_EQ(r.status, 400) << q << ": " << r.body;
    EXPECT_NE(r.body.find("bad_query"), std::string::npos) << q << ": " << r.body;
  }
  std::string many;
  for (int i = 0; i < 65; ++i) many += "link=l" + std::to_string(i) + "&";
  EXPECT_EQ(Send(s.HttpPort(), "GET", "/api/v1/timeline?" + many, "").status, 400);
  const Reply unknown = Send(s.HttpPort(), "GET", "/api/v1/timeline?link=r9/up", "");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("unknown_link"), std::string::npos) << unknown.body;
  EXPECT_NE(unknown.body.find("r9/up"), std::string::npos) << unknown.body;
}

TEST(SchedulerHttp, MetronomectlPrintsTablesAndJson) {
  Scheduler s;
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  std::vector<std::unique_ptr<ProtoClient>> clients;
  StartCluster(ctx, s, clients);
  const std::string url = "http://127.0.0.1:" + std::to_string(s.HttpPort());
  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {METRONOMECTL_BIN, "--server", url});
    return RunToEnd(args, "ctl");
  };
  auto [rc, out] = ctl({"status"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("2 (2 planned"), std::string::npos) << out;
  std::tie(rc, out) = ctl({"jobs"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("JOB"), std::string::npos) << out;
  EXPECT_NE(out.find("job-a"), std::string::npos) << out;
  EXPECT_NE(out.find("gated"), std::string::npos) << out;
  std::tie(rc, out) = ctl({"links"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("default"), std::string::npos) << out;
  EXPECT_NE(out.find("job-a,job-b"), std::string::npos) << out;
  std::tie(rc, out) = ctl({"timetable", "job-b"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("window (ms)       50.000"), std::string::npos) << out;
  std::tie(rc, out) = ctl({"--json", "timetable", "job-b"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out)["window_ns"], 50 * kMs);
  std::tie(rc, out) = ctl({"--json", "jobs"});
  EXPECT_EQ(json::parse(out)["jobs"].size(), 2u);
  std::tie(rc, out) = ctl({"--json", "--page-size", "1", "jobs"});  // two pages
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out)["jobs"].size(), 2u) << out;
  EXPECT_EQ(json::parse(out)["jobs"][1]["job"], "job-b") << out;
  std::tie(rc, out) = ctl({"plan", "--what-if", "--job", "newcomer", "--nodes", "n8,n9",
                           "--period-ms", "100", "--comm-ms", "60", "--priority", "0"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("newcomer"), std::string::npos) << out;
  EXPECT_NE(out.find("would cross: default"), std::string::npos) << out;
  std::tie(rc, out) = ctl(
      {"--json", "plan", "--what-if", "--nodes", "n8,n9", "--period-ms", "100", "--comm-ms", "10"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(json::parse(out)["jobs"][0]["candidate"].get<bool>());
  std::tie(rc, out) = ctl({"timetable", "nobody"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("no job 'nobody'"), std::string::npos) << out;
  std::tie(rc, out) = RunToEnd(
      {METRONOMECTL_BIN, "--server", "http://127.0.0.1:" + std::to_string(FreePort()), "status"},
      "ctl-down");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot reach"), std::string::npos) << out;
  std::tie(rc, out) = ctl({"frobnicate"});
  EXPECT_EQ(rc, 2) << out;
}

TEST(SchedulerConfig, HelpDocumentsEverySetting) {
  auto [rc, out] = RunToEnd({METRONOME_SCHEDULER_BIN, "--help"}, "help");
  EXPECT_EQ(rc, 0);
  for (const char* key : {"--listen",
                          "--http",
                          "--config",
                          "--topology",
                          "--log-level",
                          "--curve-secret-key-file",
                          "--curve-public-key-file",
                          "--check",
                          "--http-tls-cert-file",
                          "--http-tls-key-file",
                          "--http-tls-client-ca-file",
                          "http.tls_cert_file",
                          "http.tls_key_file",
                          "http.tls_client_ca_file",
                          "registry.rank_timeout_ms",
                          "registry.report_interval_ms",
                          "registry.max_clients",
                          "planning.min_confidence",
                          "planning.saturate_fraction",
                          "planning.wire_margin",
                          "planning.period_margin",
                          "planning.epoch_ns",
                          "planning.max_stretch",
                          "planning.min_cushion_us",
                          "planning.jitter_cushion",
                          "timetable.max_wait_ms",
                          "timetable.late_slack_scale",
                          "controller.tick_ms",
                          "controller.turns",
                          "controller.late_reports",
                          "controller.lateness_jitter_us",
                          "controller.late_fraction",
                          "controller.profile_change_threshold",
                          "controller.profile_change_reports",
                          "controller.replan_cooldown_ms",
                          "controller.offline_interval_ms",
                          "controller.offline_budget_ms",
                          "controller.offline_max_moves",
                          "controller.phase_history",
                          "kubernetes.enabled",
                          "kubernetes.rack_label",
                          "kubernetes.verify_pods",
                          "unknown_nodes_link",
                          "two_tier"}) {
    EXPECT_NE(out.find(key), std::string::npos) << "--help does not mention " << key;
  }
}

TEST(SchedulerConfig, BadConfigurationNamesTheKeyAndExitsWithTwo) {
  struct Case {
    std::string yaml;
    std::string key;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"controller:\n  late_reprots: 3\n", "controller.late_reprots", "unknown key"},
      {"registry:\n  rank_timeout_ms: -5\n", "registry.rank_timeout_ms", "must be in"},
      {"registry:\n  rank_timeout_ms: soon\n", "registry.rank_timeout_ms", "must be an integer"},
      {"listen: 127.0.0.1:7411\n", "listen", "ZeroMQ endpoint"},
      {"http: localhost\n", "http", "HOST:PORT"},
      {"log_level: loud\n", "log_level", "is not one of"},
      {"topology:\n  links:\n    - {name: a, capacity_gbps: -1}\n",
       "topology.links[0].capacity_gbps", "must be"},
      {"topology:\n  racks:\n    - {name: r0, nodes: [{name: x}, {name: x}]}\n  links: [{name: l, "
       "capacity_gbps: 1}]\n",
       "topology.racks[0].nodes[1].name", "duplicate"},
      {"topology:\n  links: [{name: l, capacity_gbps: 1}]\n  unknown_nodes_link: spine\n",
       "topology.unknown_nodes_link", "names no link"},
      {"controller: [1, 2]\n", "controller", "must be a mapping"},
      {"key: [unclosed\n", "(document)", "not valid YAML"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = TempPath("bad" + std::to_string(i) + ".yaml");
    WriteFile(path, cases[i].yaml);
    auto [rc, out] = RunToEnd({METRONOME_SCHEDULER_BIN, "--config", path, "--check"}, "bad");
    EXPECT_EQ(rc, 2) << cases[i].yaml << out;
    EXPECT_NE(out.find(cases[i].key + ": "), std::string::npos) << cases[i].yaml << out;
    EXPECT_NE(out.find(cases[i].reason), std::string::npos) << cases[i].yaml << out;
  }
  auto [rc, out] = RunToEnd({METRONOME_SCHEDULER_BIN, "--topology", "/nonexistent.yaml"}, "bad");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("topology: cannot read file"), std::string::npos) << out;
  std::tie(rc, out) = RunToEnd({METRONOME_SCHEDULER_BIN, "--no-such-flag"}, "bad");
  EXPECT_EQ(rc, 2) << out;
}

TEST(SchedulerConfig, EmbeddedDefaultsYamlFileAndFlags) {
  // No arguments: embedded defaults are valid (the check stops before binding 7411/7412).
  auto [rc, out] = RunToEnd({METRONOME_SCHEDULER_BIN, "--check"}, "defaults");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("listen=tcp://127.0.0.1:7411 http=127.0.0.1:7412 links=1"), std::string::npos)
      << out;
  // No arguments, really started, when the default ports are free here.
  if (PortFree(7411) && PortFree(7412)) {
    Process p({METRONOME_SCHEDULER_BIN}, TempPath("noargs.log"));
    EXPECT_TRUE(WaitFor([] { return HttpGetJson(7412, "/healthz").has_value(); }, 5000));
    zmq::context_t ctx0;
    ProtoClient c(ctx0, "tcp://127.0.0.1:7411");
    EXPECT_TRUE(c.Register("noargs", 0, 2, "n0"));
    EXPECT_EQ(p.Kill(SIGTERM), 0);
  }
  // A YAML file with a scenario-format topology; flags override the file's addresses.
  const std::string topo = TempPath("topo.yaml");
  WriteFile(topo,
            "topology:\n"
            "  racks:\n"
            "    - name: ra\n      uplink_gbps: 10\n"
            "      nodes: [{name: a0, nic_gbps: 25}, {name: a1, nic_gbps: 25}]\n"
            "    - name: rb\n      uplink_mbps: 10000\n"
            "      nodes: [{name: b0, nic_gbps: 25}]\n"
            "jobs: []\n");
  const int zport = FreePort(), hport = FreePort();
  const std::string cfg = TempPath("cfg.yaml");
  WriteFile(cfg, "listen: tcp://127.0.0.1:1\nhttp: 127.0.0.1:1\nlog_level: debug\ntopology: " +
                     topo + "\nregistry:\n  report_interval_ms: 250\ncontroller:\n  tick_ms: 20\n");
  Scheduler s({"--config", cfg}, zport, hport);
  ASSERT_TRUE(s.Ready()) << s.Log();
  auto links = s.Get("/api/v1/links");
  ASSERT_TRUE(links);
  std::vector<std::string> names;
  for (const auto& l : (*links)["links"]) names.push_back(l["link"]);
  EXPECT_EQ(names, (std::vector<std::string>{"ra/up", "a0/up", "a1/up", "rb/up", "b0/up"}));
  EXPECT_EQ((*links)["total"], 5);
  EXPECT_FALSE(links->contains("continue"));
  // In pages, in the same order: each page's last link is where the next one begins.
  std::vector<std::string> paged;
  std::string after;
  for (int pages = 1;; ++pages) {
    auto page = s.Get("/api/v1/links?limit=2" + (after.empty() ? "" : "&continue=" + after));
    ASSERT_TRUE(page);
    EXPECT_EQ((*page)["total"], 5);
    EXPECT_LE((*page)["links"].size(), 2u);
    for (const auto& l : (*page)["links"]) paged.push_back(l["link"]);
    if (!page->contains("continue")) {
      EXPECT_EQ(pages, 3);
      break;
    }
    after = (*page)["continue"];
    EXPECT_EQ(after, paged.back());
    ASSERT_LT(pages, 3);
  }
  EXPECT_EQ(paged, names);
  // metronomectl pages through them all.
  std::tie(rc, out) =
      RunToEnd({METRONOMECTL_BIN, "--server", "http://127.0.0.1:" + std::to_string(s.HttpPort()),
                "--json", "--page-size", "2", "links"},
               "ctl-links");
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> listed;
  const json all = json::parse(out);
  for (const auto& l : all["links"]) listed.push_back(l["link"]);
  EXPECT_EQ(listed, names) << out;
  for (const std::string q : {"limit=0", "limit=x", "limit=10001", "continue=r9/up"}) {
    const Reply r = Send(s.HttpPort(), "GET", "/api/v1/links?" + q, "");
    EXPECT_EQ(r.status, 400) << q << ": " << r.body;
    EXPECT_NE(r.body.find("bad_query"), std::string::npos) << q << ": " << r.body;
  }
  zmq::context_t ctx;
  ProtoClient c0(ctx, s.Endpoint()), c1(ctx, s.Endpoint());
  auto w = c0.Register("x", 0, 2, "a0");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->report_interval_ms, 250u);
  ASSERT_TRUE(c1.Register("x", 1, 2, "b0"));
  c0.Send(c0.MakeReport("x", 0, 100 * kMs, 10 * kMs));
  ASSERT_TRUE(c0.Expect<proto::TimetablePush>());
  auto job = s.Get("/api/v1/jobs/x");
  EXPECT_EQ((*job)["links"], json::array({"ra/up", "a0/up", "rb/up", "b0/up"}));
  EXPECT_NE(s.Log().find(" debug "), std::string::npos) << "log_level from the file";
}

}  // namespace
}  // namespace metronome::testing
