// The kube-scheduler extender mounted on metronome-scheduler's HTTP server: real-shaped
// ExtenderArgs bodies (tests/unit/extender/fixtures/) posted to /extender/prioritize and
// /extender/filter while two jobs are planned, a malformed body answered 400 with JSON, and the
// extender's counters and latency histograms on /metrics moving with those calls.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "harness.hpp"
#include "metronome/common/clock.hpp"

namespace metronome::testing {
namespace {

std::string Fixture(const std::string& name) {
  return ReadFile(std::string(METRONOME_EXTENDER_FIXTURES) + "/" + name);
}

httplib::Result Post(int port, const std::string& path, const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(10, 0);
  return c.Post(path.c_str(), body, "application/json");
}

// Two planned jobs, "hp-train" on the fixture's gpu-a1 + gpu-a2 and "job-b" on n2 + n3.
void StartCluster(zmq::context_t& ctx, const Scheduler& s,
                  std::vector<std::unique_ptr<ProtoClient>>& clients) {
  const std::vector<std::pair<std::string, std::string>> ranks = {
      {"hp-train", "gpu-a1"}, {"hp-train", "gpu-a2"}, {"job-b", "n2"}, {"job-b", "n3"}};
  for (size_t i = 0; i < ranks.size(); ++i) {
    clients.push_back(std::make_unique<ProtoClient>(ctx, s.Endpoint()));
    ASSERT_TRUE(clients.back()->Register(ranks[i].first, static_cast<uint32_t>(i % 2), 2,
                                         ranks[i].second, i < 2 ? 2 : 1));
  }
  clients[0]->Send(clients[0]->MakeReport("hp-train", 0, 200 * kMs, 150 * kMs));
  clients[2]->Send(clients[2]->MakeReport("job-b", 0, 200 * kMs, 40 * kMs));
  ASSERT_TRUE(clients[0]->Expect<proto::TimetablePush>());
  ASSERT_TRUE(clients[2]->Expect<proto::TimetablePush>());
}

std::set<std::string> RequestNodes(const json& request) {
  std::set<std::string> nodes;
  if (request.contains("NodeNames") && request["NodeNames"].is_array()) {
    for (const auto& n : request["NodeNames"]) nodes.insert(n.get<std::string>());
  }
  if (request.contains("Nodes") && request["Nodes"].is_object()) {
    for (const auto& n : request["Nodes"]["items"]) nodes.insert(n["metadata"]["name"]);
  }
  return nodes;
}

// A scheduler with the two jobs planned.
class ExtenderOnAPlannedCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.Ready()) << s_.Log();
    StartCluster(ctx_, s_, clients_);
  }
  Scheduler s_;
  zmq::context_t ctx_;
  std::vector<std::unique_ptr<ProtoClient>> clients_;
};

TEST_F(ExtenderOnAPlannedCluster, PrioritizeAndFilterAnswerRealShapedRequests) {
  ASSERT_TRUE(WaitFor([&] {
    auto st = s_.Get("/api/v1/status");
    return st && (*st)["jobs_planned"] == 2;
  }));

  for (const char* fixture : {"prioritize_node_names.json", "filter_full_nodes.json"}) {
    SCOPED_TRACE(fixture);
    const std::string body = Fixture(fixture);
    ASSERT_FALSE(body.empty());
    const std::set<std::string> nodes = RequestNodes(json::parse(body));
    ASSERT_FALSE(nodes.empty());

    auto r = Post(s_.HttpPort(), "/extender/prioritize", body);
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    const json list = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(list.is_array()) << r->body;  // HostPriorityList
    std::set<std::string> scored;
    for (const json& hp : list) {
      ASSERT_TRUE(hp.contains("Host") && hp.contains("Score")) << hp.dump();
      const int64_t score = hp["Score"].get<int64_t>();
      EXPECT_GE(score, 0) << hp.dump();
      EXPECT_LE(score, 10) << hp.dump();
      scored.insert(hp["Host"].get<std::string>());
    }
    EXPECT_EQ(scored, nodes);

    auto f = Post(s_.HttpPort(), "/extender/filter", body);
    ASSERT_TRUE(f) << httplib::to_string(f.error());
    ASSERT_EQ(f->status, 200) << f->body;
    const json result = json::parse(f->body, nullptr, false);
    ASSERT_TRUE(result.is_object()) << f->body;  // ExtenderFilterResult
    for (const char* key : {"Nodes", "NodeNames", "FailedNodes", "Error"}) {
      EXPECT_TRUE(result.contains(key)) << key << " in " << f->body;
    }
    EXPECT_EQ(result["Error"], "");
    // Every candidate either passes or is named in FailedNodes.
    std::set<std::string> answered = RequestNodes(result);
    for (const auto& [node, why] : result["FailedNodes"].items()) answered.insert(node);
    EXPECT_EQ(answered, nodes);
  }

  for (const char* verb : {"/extender/prioritize", "/extender/filter"}) {
    auto bad = Post(s_.HttpPort(), verb, "{\"Pod\": [not json");
    ASSERT_TRUE(bad) << httplib::to_string(bad.error());
    EXPECT_EQ(bad->status, 400) << verb;
    const json err = json::parse(bad->body, nullptr, false);
    EXPECT_TRUE(err.is_object()) << verb << ": " << bad->body;
  }

  // The scheduler keeps serving, and the routes are counted under their names.
  EXPECT_TRUE(s_.Get("/healthz").has_value());
  const std::string m = s_.Metrics();
  EXPECT_NE(m.find("extender_prioritize"), std::string::npos);
  EXPECT_NE(m.find("extender_filter"), std::string::npos);
  EXPECT_EQ(s_.Stop(), 0) << s_.Log();
}

// The extender's own counters on /metrics: calls and 400s per verb, handling-time histograms,
// with HELP text; each moves by exactly the calls made between two scrapes.
TEST_F(ExtenderOnAPlannedCluster, MetricsCountCallsRejectionsAndLatencyPerVerb) {
  const std::string before = s_.Metrics();
  for (const char* help : {"# HELP metronome_extender_requests_total ",
                           "# HELP metronome_extender_bad_requests_total ",
                           "# HELP metronome_extender_request_duration_seconds ",
                           "# TYPE metronome_extender_request_duration_seconds histogram",
                           "# HELP metronome_extender_nodes_filtered_out_total ",
                           "# HELP metronome_extender_neutral_answers_total "}) {
    EXPECT_NE(before.find(help), std::string::npos) << help;
  }
  const auto value = [](const std::string& m, const std::string& series) {
    return MetricValue(m, series);
  };
  for (const char* verb : {"filter", "prioritize"}) {
    const std::string v = std::string("{verb=\"") + verb + "\"}";
    EXPECT_EQ(value(before, "metronome_extender_requests_total" + v), 0) << verb;
    EXPECT_EQ(value(before, "metronome_extender_bad_requests_total" + v), 0) << verb;
    EXPECT_EQ(value(before, "metronome_extender_request_duration_seconds_count" + v), 0) << verb;
  }

  // kube-scheduler's sequence for one pod: filter, then prioritize the nodes that passed; plus
  // a second pod's filter and one malformed body per verb.
  const std::string full = Fixture("filter_full_nodes.json");
  const std::string names = Fixture("prioritize_node_names.json");
  for (const auto& [verb, body, status] : std::vector<std::tuple<std::string, std::string, int>>{
           {"/extender/filter", full, 200},
           {"/extender/prioritize", full, 200},
           {"/extender/filter", names, 200},
           {"/extender/filter", "{\"Pod\": [not json", 400},
           {"/extender/prioritize", "{\"NodeNames\": 7}", 400}}) {
    auto r = Post(s_.HttpPort(), verb, body);
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, status) << verb << ": " << r->body;
  }

  const std::string after = s_.Metrics();
  const auto moved = [&](const std::string& series) {
    return value(after, series) - value(before, series);
  };
  const std::string filter = "{verb=\"filter\"}", prioritize = "{verb=\"prioritize\"}";
  EXPECT_EQ(moved("metronome_extender_requests_total" + filter), 3);
  EXPECT_EQ(moved("metronome_extender_requests_total" + prioritize), 2);
  EXPECT_EQ(moved("metronome_extender_bad_requests_total" + filter), 1);
  EXPECT_EQ(moved("metronome_extender_bad_requests_total" + prioritize), 1);
  EXPECT_EQ(moved("metronome_extender_request_duration_seconds_count" + filter), 3);
  EXPECT_EQ(moved("metronome_extender_request_duration_seconds_count" + prioritize), 2);
  EXPECT_GT(moved("metronome_extender_request_duration_seconds_sum" + filter), 0);
  // Every call falls in a bucket: the +Inf bucket holds them all.
  EXPECT_EQ(value(after,
                  "metronome_extender_request_duration_seconds_bucket{verb=\"filter\","
                  "le=\"+Inf\"}"),
            3);
  EXPECT_GE(value(after, "metronome_extender_nodes_filtered_out_total"), 0);
  EXPECT_GT(value(after, "metronome_extender_state_version"), 0);
  EXPECT_EQ(value(after, "metronome_extender_internal_errors_total"), 0);

  // Prioritize after filter for the same pod reuses the filter's verdicts while the snapshot
  // they were computed on is still the extender's: the pair is tried again where a planning
  // round rebuilt it between the two calls (the jobs' first rounds may still be coming in).
  bool compared = false;
  for (int attempt = 0; attempt < 5 && !compared; ++attempt) {
    const std::string m0 = s_.Metrics();
    for (const char* verb : {"/extender/filter", "/extender/prioritize"}) {
      auto r = Post(s_.HttpPort(), verb, full);
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      ASSERT_EQ(r->status, 200) << verb << ": " << r->body;
    }
    const std::string m1 = s_.Metrics();
    if (value(m1, "metronome_extender_snapshot_rebuilds_total") !=
        value(m0, "metronome_extender_snapshot_rebuilds_total")) {
      continue;
    }
    compared = true;
    EXPECT_EQ(value(m1, "metronome_extender_reused_decisions_total") -
                  value(m0, "metronome_extender_reused_decisions_total"),
              1)
        << "prioritize after filter for the same pod reuses its verdicts";
  }
  EXPECT_TRUE(compared) << "the extender's snapshot was rebuilt during each of 5 tries";
  EXPECT_EQ(s_.Stop(), 0) << s_.Log();
}

// Outside a cluster, kubernetes.enabled cannot read the in-cluster configuration: an error is
// logged and the scheduler (and its extender) keeps serving.
TEST(SchedulerExtender, KubernetesEnabledOutsideAClusterKeepsServing) {
  const std::string config = TempPath("kube-config.yaml");
  WriteFile(config, "kubernetes:\n  enabled: true\n  rack_label: example.com/rack\n");
  Scheduler s({"--config", config});
  ASSERT_TRUE(s.Ready()) << s.Log();
  auto r = Post(s.HttpPort(), "/extender/prioritize", Fixture("prioritize_node_names.json"));
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(WaitFor([&] {
    return s.Log().find("in-cluster configuration") != std::string::npos;
  })) << s.Log();
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

}  // namespace
}  // namespace metronome::testing
