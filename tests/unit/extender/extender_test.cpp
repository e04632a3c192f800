// The filter and prioritize verbs, with request bodies shaped like kube-scheduler's (full Pod and
// Node objects in fixtures/), against a small cluster: rack-a (gpu-a1, gpu-a2) and rack-b
// (gpu-b1, gpu-b2) from the nodes' topology.kubernetes.io/zone labels; a high-priority job
// "hp-train" on gpu-a1 + gpu-a2 that holds its node uplinks 150 ms of every 200 ms; and the
// low-priority job "lp-train", one pod already bound to gpu-b2, whose second pod is scheduled.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "metronome/common/clock.hpp"
#include "metronome/controller/plan_snapshot.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/extender/extender.hpp"
#include "metronome/models/model_table.hpp"

namespace metronome::extender {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(METRONOME_EXTENDER_FIXTURES) + "/" + name);
  EXPECT_TRUE(in) << name;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ClusterState Cluster() {
  ClusterState s;
  s.version = 7;
  s.network.unknown_nodes_link = "";
  JobSnapshot hp;
  hp.name = "hp-train";
  hp.priority = kPriorityHigh;
  hp.nodes = {"gpu-a1", "gpu-a2"};
  hp.profile.period_ns = 200 * kMs;
  hp.profile.comm_ns = 150 * kMs;
  s.jobs.push_back(hp);
  s.placed_pods["lp-train"] = {"gpu-b2"};
  return s;
}

std::map<std::string, NodeLabels> RackLabels() {
  return {{"gpu-a1", {{"topology.kubernetes.io/zone", "rack-a"}}},
          {"gpu-a2", {{"topology.kubernetes.io/zone", "rack-a"}}},
          {"gpu-b1", {{"topology.kubernetes.io/zone", "rack-b"}}},
          {"gpu-b2",
           {{"topology.kubernetes.io/zone", "rack-b"},
            {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"}}}};
}

std::map<std::string, int> Scores(const std::string& body) {
  std::map<std::string, int> out;
  for (const Json& e : Json::parse(body)) out[e.at("Host")] = e.at("Score");
  return out;
}

TEST(ExtenderFilter, FullNodesRemovesOnlyNodesThatBreakAHigherPriorityTimetable) {
  Extender ext;
  ext.UpdateState(Cluster());
  const ExtenderResponse r = ext.HandleFilter(Fixture("filter_full_nodes.json"));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  // ExtenderFilterResult, Go field names; nodeCacheCapable false: answered with Nodes.
  for (const char* key :
       {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["NodeNames"].is_null());
  EXPECT_EQ(j["Error"], "");
  ASSERT_TRUE(j["Nodes"]["items"].is_array());
  std::vector<std::string> passed;
  for (const Json& n : j["Nodes"]["items"]) passed.push_back(n["metadata"]["name"]);
  EXPECT_EQ(passed, (std::vector<std::string>{"gpu-b1", "gpu-b2"}));
  // The Node objects go back whole, as received.
  const Json request = Json::parse(Fixture("filter_full_nodes.json"));
  EXPECT_EQ(j["Nodes"]["items"][0], request["Nodes"]["items"][2]);

  ASSERT_EQ(j["FailedNodes"].size(), 2u);
  const std::string why = j["FailedNodes"]["gpu-a1"];
  EXPECT_NE(why.find("hp-train (priority 2)"), std::string::npos) << why;
  EXPECT_NE(why.find("gpu-a1/up"), std::string::npos) << why;
  EXPECT_TRUE(j["FailedNodes"].contains("gpu-a2"));
  EXPECT_TRUE(j["FailedAndUnresolvableNodes"].empty());

  const ExtenderStats s = ext.Stats();
  EXPECT_EQ(s.filter_requests, 1u);
  EXPECT_EQ(s.nodes_filtered_out, 2u);
  EXPECT_EQ(s.bad_requests, 0u);
  EXPECT_EQ(s.state_version, 7u);
}

TEST(ExtenderFilter, HigherPriorityPodsAreNeverFilteredForLowerPriorityJobs) {
  Extender ext;
  ext.UpdateState(Cluster());
  // Same pod, but a PriorityClass of value 1000000 makes it high: hp-train is not higher.
  const ExtenderResponse r = ext.HandleFilter(Fixture("filter_priority_class.json"));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_TRUE(j["FailedNodes"].empty());
  EXPECT_EQ(j["Nodes"]["items"].size(), 4u);
}

TEST(ExtenderFilter, NeverStarvesWhenEveryNodeWouldConflict) {
  Json req = Json::parse(Fixture("filter_full_nodes.json"));
  auto& items = req["Nodes"]["items"];
  items.erase(items.begin() + 2, items.end());  // only gpu-a1 and gpu-a2 remain
  {
    Extender ext;
    ext.UpdateState(Cluster());
    const Json j = Json::parse(ext.HandleFilter(req.dump()).body);
    EXPECT_TRUE(j["FailedNodes"].empty());
    EXPECT_EQ(j["Nodes"]["items"].size(), 2u);
    EXPECT_EQ(ext.Stats().never_starve_passes, 1u);
  }
  ExtenderConfig strict;
  strict.never_starve = false;
  Extender ext(strict);
  ext.UpdateState(Cluster());
  const Json j = Json::parse(ext.HandleFilter(req.dump()).body);
  EXPECT_EQ(j["FailedNodes"].size(), 2u);
  EXPECT_TRUE(j["Nodes"]["items"].empty());
}

// The jobs metronome-scheduler planned are scored as its planner has them, not rebuilt from
// what the registry measured: here the controller widened hp-train's window to 150 ms (its
// phases took that long, the overrun rule) although its last measured phase was 50 ms. Beside
// a 50 ms window the 100 ms phases of lp-train would fit; beside the planned one they do not.
// The jobs metronome-scheduler planned are scored as its planner has them (ClusterState::plan,
// here from the controller's PlanningAdapter, as the service hands it over), not rebuilt from
// what the registry measured: the overrun rule widened hp-train's window to 150 ms (its phases
// took that long) although its last measured phase was 50 ms.
TEST(ExtenderFilter, PlannedJobsAreScoredAsTheSchedulersPlannerHasThem) {
  constexpr double kNic = 100e9 / 8;
  ClusterState s;
  s.version = 3;
  s.network.unknown_nodes_link = "";
  for (const std::string rack : {"a", "b"}) {
    controller::TopologyConfig::RackSpec r{"rack-" + rack, kNic, {}};
    for (const char* n : {"1", "2"}) r.nodes.push_back({"gpu-" + rack + n, kNic});
    s.network.racks.push_back(r);
  }
  JobSnapshot hp;
  hp.id = 1;
  hp.name = "hp-train";
  hp.priority = kPriorityHigh;
  hp.nodes = {"gpu-a1", "gpu-a2"};
  hp.profile = {200 * kMs, 50 * kMs, 625'000'000};  // 50 ms on the wire at 100 Gbit/s
  s.jobs.push_back(hp);
  s.placed_pods["lp-train"] = {"gpu-b2"};

  const auto planned = [&](int64_t floor_ns) {
    controller::PlanningAdapter planner(s.network, s.planning);
    controller::PlanJob job;
    job.id = hp.id;
    job.name = hp.name;
    job.priority = hp.priority;
    job.nodes = hp.nodes;
    job.profile = hp.profile;
    job.profile.phase_floor_ns = floor_ns;
    planner.AddJob(job);
    return planner.Summary().snapshot;
  };
  const auto failed = [](const ClusterState& state, int gradient_mb) {
    Json req = Json::parse(Fixture("filter_full_nodes.json"));
    req["Pod"]["metadata"]["annotations"]["metronome.dev/gradient-mb"] =
        std::to_string(gradient_mb);
    Extender ext;
    ext.UpdateState(state);
    const Json j = Json::parse(ext.HandleFilter(req.dump()).body);
    std::vector<std::string> out;
    for (const auto& [node, why] : j["FailedNodes"].items()) out.push_back(node);
    return out;
  };
  // lp-train's second pod moves 100 MB per phase (~9 ms on the wire): beside a 55 ms window
  // it takes hp-train's period, gated; beside a 150 ms one it cannot, and would drift into it.
  const std::vector<std::string> none;
  const std::vector<std::string> rack_a = {"gpu-a1", "gpu-a2"};
  EXPECT_EQ(failed(s, 100), none) << "unplanned: hp-train as measured";
  s.plan = {planned(0)};
  EXPECT_EQ(failed(s, 100), none) << "planned as measured";
  s.plan = {planned(150 * kMs)};
  EXPECT_EQ(failed(s, 100), rack_a) << "planned with the window the controller widened";
}

TEST(ExtenderPrioritize, ScoresByPredictedSlowdownOnTheLinksCrossed) {
  Extender ext;
  ext.UpdateState(Cluster());
  Json req = Json::parse(Fixture("filter_full_nodes.json"));
  const ExtenderResponse r = ext.HandlePrioritize(req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json list = Json::parse(r.body);
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0]["Host"], "gpu-a1");  // request order
  for (const Json& e : list) {
    ASSERT_TRUE(e["Score"].is_number_integer());
    EXPECT_GE(e["Score"].get<int>(), 0);
    EXPECT_LE(e["Score"].get<int>(), 10);  // MaxExtenderPriority
  }
  const auto s = Scores(r.body);
  EXPECT_EQ(s.at("gpu-b2"), 10) << "beside its other pod: crosses no link";
  EXPECT_EQ(s.at("gpu-b1"), 10) << "free links: it gets a window at its natural period";
  EXPECT_LT(s.at("gpu-a1"), s.at("gpu-b1"));
  EXPECT_LT(s.at("gpu-a2"), s.at("gpu-b1"));
  EXPECT_EQ(ext.Stats().prioritize_requests, 1u);
}

TEST(ExtenderPrioritize, NodeNamesUseTheModelTableAndCachedLabels) {
  Extender ext;
  ClusterState state = Cluster();
  state.node_labels = RackLabels();
  // The resnet-ddp job already has a pod on gpu-a1, inside hp-train's busy uplink.
  state.placed_pods["resnet-ddp"] = {"gpu-a1"};
  ext.UpdateState(state);
  const ExtenderResponse r = ext.HandlePrioritize(Fixture("prioritize_node_names.json"));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto s = Scores(r.body);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.at("gpu-a1"), 10) << "same node as its other pod";
  // Anywhere else it must cross gpu-a1/up, where hp-train leaves 50 ms in 200 ms: ResNet-50's
  // ~100 MB all-reduce (8 ms at 100 Gbit/s) fits there, so others score well but not above.
  for (const char* n : {"gpu-a2", "gpu-b1", "gpu-b2"}) {
    EXPECT_LE(s.at(n), s.at("gpu-a1")) << n;
    EXPECT_GT(s.at(n), 0) << n;
  }
  EXPECT_EQ(ext.Stats().pods_without_profile, 0u);

  // NodeNames in, NodeNames out for filter too.
  const ExtenderResponse f = ext.HandleFilter(Fixture("prioritize_node_names.json"));
  ASSERT_EQ(f.status, 200) << f.body;
  const Json j = Json::parse(f.body);
  EXPECT_TRUE(j["Nodes"].is_null());
  EXPECT_EQ(j["NodeNames"].size() + j["FailedNodes"].size(), 4u);
}

TEST(ExtenderPrioritize, MeasuredProfilesOfEarlierRunsAreUsedWhenNothingIsDeclared) {
  Json req = Json::parse(Fixture("prioritize_node_names.json"));
  auto& ann = req["Pod"]["metadata"]["annotations"];
  ann.erase("metronome.dev/model");
  ClusterState state = Cluster();
  state.node_labels = RackLabels();
  {
    Extender ext;
    ext.UpdateState(state);
    const auto s = Scores(ext.HandlePrioritize(req.dump()).body);
    for (const auto& [node, score] : s) EXPECT_EQ(score, 0) << "no profile: no opinion";
    EXPECT_EQ(ext.Stats().pods_without_profile, 1u);
  }
  state.measured["resnet-ddp"] = {300 * kMs, 120 * kMs, 0};
  state.placed_pods["resnet-ddp"] = {"gpu-b1"};
  Extender ext;
  ext.UpdateState(state);
  const auto s = Scores(ext.HandlePrioritize(req.dump()).body);
  EXPECT_EQ(s.at("gpu-b1"), 10);
  EXPECT_EQ(s.at("gpu-b2"), 10);
  EXPECT_LT(s.at("gpu-a1"), 10) << "would contend with hp-train";
  EXPECT_EQ(ext.Stats().pods_without_profile, 0u);
}

TEST(ExtenderPrioritize, DeclaredTrafficProfilesStandInForAnnotations) {
  Json req = Json::parse(Fixture("prioritize_node_names.json"));
  req["Pod"]["metadata"]["annotations"].erase("metronome.dev/model");
  ClusterState state = Cluster();
  state.node_labels = RackLabels();
  state.placed_pods["resnet-ddp"] = {"gpu-b1"};
  DeclaredProfile d;
  d.job_name = "resnet-ddp";
  d.period_ms = 200;
  d.gradient_mb = 1192.1;  // 100 ms at 100 Gbit/s: cannot fit beside hp-train
  state.declared["resnet-ddp"] = d;
  Extender ext;
  ext.UpdateState(state);
  const auto s = Scores(ext.HandlePrioritize(req.dump()).body);
  EXPECT_EQ(s.at("gpu-b2"), 10);
  EXPECT_LT(s.at("gpu-a1"), 5);
}

TEST(ExtenderVerbs, PodsOfNoJobGetNeutralAnswers) {
  Extender ext;
  ext.UpdateState(Cluster());
  const std::string body = Fixture("filter_pod_without_job.json");
  const Json f = Json::parse(ext.HandleFilter(body).body);
  EXPECT_EQ(f["Nodes"]["items"].size(), 2u);
  EXPECT_TRUE(f["FailedNodes"].empty());
  const auto s = Scores(ext.HandlePrioritize(body).body);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.begin()->second, std::next(s.begin())->second);
  EXPECT_EQ(ext.Stats().pods_without_job, 1u);
  EXPECT_EQ(ext.Stats().reused_decisions, 1u) << "prioritize reuses the same pod's filter";
}

// A pod may declare any positive number: the conversions saturate (no out-of-range cast), and
// the answer is a valid one whatever the planner makes of the job.
TEST(ExtenderVerbs, AbsurdDeclaredNumbersNeverFailARequest) {
  Extender ext;
  ext.UpdateState(Cluster());
  for (const char* value : {"1e300", "1e-300", "99999999999999999999", "0.00001"}) {
    Json req = Json::parse(Fixture("filter_full_nodes.json"));
    auto& ann = req["Pod"]["metadata"]["annotations"];
    ann["metronome.dev/gradient-mb"] = value;
    ann["metronome.dev/period-ms"] = value;
    const ExtenderResponse f = ext.HandleFilter(req.dump());
    ASSERT_EQ(f.status, 200) << value << ": " << f.body;
    const ExtenderResponse p = ext.HandlePrioritize(req.dump());
    ASSERT_EQ(p.status, 200) << value << ": " << p.body;
    for (const auto& [node, score] : Scores(p.body)) {
      EXPECT_GE(score, 0) << value << " " << node;
      EXPECT_LE(score, 10) << value << " " << node;
    }
  }
}

// An annotation that cannot be read is ignored (the pod is still answered for, as if it were not
// there), counted on every call and logged.
TEST(ExtenderVerbs, UnreadableAnnotationsAreCountedAndTheRestServed) {
  Extender ext;
  ext.UpdateState(Cluster());
  Json req = Json::parse(Fixture("filter_full_nodes.json"));
  const std::string clean = ext.HandlePrioritize(req.dump()).body;
  EXPECT_EQ(ext.Stats().bad_annotations, 0u);
  auto& ann = req["Pod"]["metadata"]["annotations"];
  ann["metronome.dev/priority"] = "urgent";
  ann["metronome.dev/ranks"] = "x";
  EXPECT_EQ(ext.HandleFilter(req.dump()).status, 200);
  const ExtenderResponse p = ext.HandlePrioritize(req.dump());
  ASSERT_EQ(p.status, 200);
  EXPECT_EQ(p.body, clean) << "the annotations read as absent";
  EXPECT_EQ(ext.Stats().bad_annotations, 2u);
}

TEST(ExtenderVerbs, NoStateYetPassesEverything) {
  Extender ext;  // nothing fed: no jobs, no topology
  const Json f = Json::parse(ext.HandleFilter(Fixture("filter_full_nodes.json")).body);
  EXPECT_EQ(f["Nodes"]["items"].size(), 4u);
  const ExtenderResponse p = ext.HandlePrioritize(Fixture("filter_full_nodes.json"));
  EXPECT_EQ(p.status, 200);
  for (const auto& [node, score] : Scores(p.body)) EXPECT_EQ(score, 10) << node;
}

TEST(ExtenderVerbs, EmptyAndNullCandidateListsAreValid) {
  Extender ext;
  ext.UpdateState(Cluster());
  Json req = Json::parse(Fixture("prioritize_node_names.json"));
  req["NodeNames"] = Json::array();
  EXPECT_EQ(ext.HandlePrioritize(req.dump()).body, "[]");
  req["NodeNames"] = nullptr;
  const ExtenderResponse f = ext.HandleFilter(req.dump());
  EXPECT_EQ(f.status, 200);
  EXPECT_TRUE(Json::parse(f.body)["FailedNodes"].empty());
}

TEST(ExtenderVerbs, MalformedBodiesAre400WithAJsonMessageAndCounted) {
  Extender ext;
  ext.UpdateState(Cluster());
  Json good = Json::parse(Fixture("prioritize_node_names.json"));
  Json no_pod = good;
  no_pod.erase("Pod");
  Json unnamed_pod = good;
  unnamed_pod["Pod"]["metadata"].erase("name");
  Json bad_names = good;
  bad_names["NodeNames"] = {"gpu-a1", 3};
  Json bad_nodes = good;
  bad_nodes["Nodes"] = {{"items", "gpu-a1"}};
  Json unnamed_node = Json::parse(Fixture("filter_full_nodes.json"));
  unnamed_node["Nodes"]["items"][1]["metadata"].erase("name");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not JSON"},
      {"{\"Pod\": ", "not JSON"},
      {"[1, 2]", "must be a JSON object"},
      {no_pod.dump(), "Pod is missing"},
      {unnamed_pod.dump(), "metadata.name"},
      {bad_names.dump(), "NodeNames[1]"},
      {bad_nodes.dump(), "Nodes.items must be a list"},
      {unnamed_node.dump(), "items[1] has no metadata.name"},
  };
  uint64_t expected = 0;
  for (const auto& [body, message] : cases) {
    for (const bool filter : {true, false}) {
      const ExtenderResponse r = filter ? ext.HandleFilter(body) : ext.HandlePrioritize(body);
      EXPECT_EQ(r.status, 400) << body.substr(0, 60);
      const Json j = Json::parse(r.body, nullptr, false);
      ASSERT_TRUE(j.is_object()) << r.body;
      EXPECT_EQ(j["error"], "bad_request");
      EXPECT_NE(j["message"].get<std::string>().find(message), std::string::npos) << j["message"];
      EXPECT_EQ(ext.Stats().bad_requests, ++expected);
    }
  }
  // Counted per verb, and timed like any other call.
  const ExtenderStats s = ext.Stats();
  EXPECT_EQ(s.filter_bad_requests, cases.size());
  EXPECT_EQ(s.prioritize_bad_requests, cases.size());
  EXPECT_EQ(s.filter_requests, cases.size());
  EXPECT_EQ(s.filter_latency.count, cases.size());
  EXPECT_EQ(s.prioritize_latency.count, cases.size());
  EXPECT_EQ(s.internal_errors, 0u);
}

// Each call lands in one bucket of its verb's latency histogram; the sum is the time taken.
TEST(ExtenderVerbs, LatencyHistogramPerVerb) {
  Extender ext;
  ext.UpdateState(Cluster());
  const std::string body = Fixture("filter_full_nodes.json");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ext.HandlePrioritize(body).status, 200);
  ASSERT_EQ(ext.HandleFilter(body).status, 200);
  const ExtenderStats s = ext.Stats();
  EXPECT_EQ(s.prioritize_latency.count, 3u);
  EXPECT_EQ(s.filter_latency.count, 1u);
  uint64_t in_buckets = 0;
  for (const uint64_t c : s.prioritize_latency.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 3u);
  EXPECT_GT(s.prioritize_latency.sum_seconds, 0.0);
  EXPECT_LT(s.prioritize_latency.sum_seconds, 30.0);
  EXPECT_EQ(s.bad_requests, 0u);
}

// Node lists are scanned, not parsed into a tree: strings holding brackets, quotes, escapes and
// UTF-8, compact or pretty text must pass; anything a JSON parser refuses, anywhere (a node's
// text goes back to kube-scheduler as it came), is a 400: broken brackets, member syntax,
// literals and numbers (also beyond a double's largest; below its least is read as 0 and kept),
// bad escapes, lone surrogates, invalid UTF-8, nesting beyond 128.
TEST(ExtenderVerbs, NodeListScannerKeepsNodesVerbatimAndRejectsBrokenStructure) {
  Extender ext;
  ext.UpdateState(Cluster());
  Json req = Json::parse(Fixture("filter_full_nodes.json"));
  auto& items = req["Nodes"]["items"];
  items[2]["metadata"]["annotations"]["odd"] = "a]}\"[{b\\ \u00e9 \n";
  items[3]["metadata"]["labels"]["note"] = "x\"y \U0001F600";
  items[3]["status"]["big"] = 1.5e300;  // a double's range holds it: kept
  for (const std::string& body : {req.dump(), req.dump(2)}) {
    const ExtenderResponse r = ext.HandleFilter(body);
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 200);
    const Json j = Json::parse(r.body);
    ASSERT_EQ(j["Nodes"]["items"].size(), 2u);
    EXPECT_EQ(j["Nodes"]["items"][0], items[2]);
    EXPECT_EQ(j["Nodes"]["items"][1], items[3]);
  }
  {
    // Below a double's least: JSON readers take it as 0 or a subnormal, so it is kept verbatim.
    items[3]["status"]["tiny"] = "TINY";
    items[3]["status"]["subnormal"] = "SUBNORMAL";
    std::string body = req.dump();
    body.replace(body.find("\"TINY\""), 6, "-1e-400");
    body.replace(body.find("\"SUBNORMAL\""), 11, "1e-310");
    const ExtenderResponse r = ext.HandleFilter(body);
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 200);
    EXPECT_NE(r.body.find("\"tiny\":-1e-400"), std::string::npos);
    EXPECT_NE(r.body.find("\"subnormal\":1e-310"), std::string::npos);
    EXPECT_EQ(Json::parse(r.body)["Nodes"]["items"].size(), 2u);
    items[3]["status"].erase("tiny");
    items[3]["status"].erase("subnormal");
  }
  const std::string text = req.dump();
  const size_t at = text.find("\"allocatable\"");
  ASSERT_NE(at, std::string::npos);
  const std::vector<std::string> broken = {
      text + " x",                                         // trailing characters
      text.substr(0, text.size() - 1),                     // truncated
      std::string(text).insert(at, "{"),                   // unbalanced
      std::string(text).insert(at, "]"),                   // mismatched bracket inside a node
      std::string(text).insert(at, "\"k\": tru, "),        // bad literal inside a node
      std::string(text).insert(at, "\"k\" 1, "),           // no colon inside a node
      std::string(text).insert(at, "\"k\": 1 "),           // no comma inside a node
      std::string(text).insert(at, "\"k\": [1,], "),       // trailing comma inside a node
      std::string(text).insert(at, "\"k\": 01, "),         // leading zero
      std::string(text).insert(at, "\"k\": 1.e5, "),       // no fraction digits
      std::string(text).insert(at, "\"k\": 3e0229262, "),  // beyond a double (fuzzer)
      std::string(text).insert(at, "\"k\": -1" + std::string(400, '0') + "e-50, "),  // -1e350
      std::string(text).insert(at, "\"k\": 1" + std::string(400, '0') + ", "),       // 1e400
      std::string(text).insert(at, "\"k\": 0.0001e313, "),                           // 1e309
      std::string(text).insert(at, "\"k\": \"\\x\", "),           // unknown escape
      std::string(text).insert(at, "\"k\": \"\\u12G4\", "),       // bad \\u escape
      std::string(text).insert(at, "\"k\": \"\\ud800\", "),       // lone high surrogate
      std::string(text).insert(at, "\"k\": \"\\udc00\", "),       // lone low surrogate
      std::string(text).insert(at, "\"k\": \"a\x87z\", "),        // invalid UTF-8 (fuzzer)
      std::string(text).insert(at, "\"k\": \"\xc0\xaf\", "),      // overlong UTF-8
      std::string(text).insert(at, "\"k\": \"\xed\xa0\x80\", "),  // a surrogate in UTF-8
      std::string(text).insert(
          at, "\"k\": " + std::string(200, '[') + std::string(200, ']') + ", "),  // nested too deep
  };
  for (const std::string& body : broken) {
    const ExtenderResponse r = ext.HandleFilter(body);
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 200);
    EXPECT_NE(r.body.find("not JSON"), std::string::npos) << r.body.substr(0, 200);
  }
}

TEST(ExtenderVerbs, StateUpdatesTakeEffectAndLabelsCanBeReplaced) {
  Extender ext;
  ext.UpdateState(Cluster());
  ClusterState moved = Cluster();
  moved.version = 8;
  moved.jobs.clear();  // hp-train finished
  ext.UpdateState(moved);
  const Json j = Json::parse(ext.HandleFilter(Fixture("filter_full_nodes.json")).body);
  EXPECT_TRUE(j["FailedNodes"].empty());
  EXPECT_EQ(ext.Stats().state_version, 8u);
  ext.UpdateNodeLabels(RackLabels());
  EXPECT_GE(ext.Stats().snapshot_rebuilds, 3u);
}

TEST(ExtenderVerbs, ConcurrentRequestsAndUpdatesAreSafe) {
  Extender ext;
  ext.UpdateState(Cluster());
  const std::string full = Fixture("filter_full_nodes.json");
  const std::string names = Fixture("prioritize_node_names.json");
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (t == 0) {
          ClusterState s = Cluster();
          s.version = 100 + static_cast<uint64_t>(i);
          ext.UpdateState(s);
        } else {
          EXPECT_EQ(ext.HandleFilter(t == 1 ? full : names).status, 200);
          EXPECT_EQ(ext.HandlePrioritize(t == 2 ? full : names).status, 200);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ext.Stats().bad_requests, 0u);
}

// Requests served at once read one snapshot, and its planner's queries use scratch space: they
// take turns on it (a race there corrupted memory; ThreadSanitizer shows it without the lock).
TEST(ExtenderVerbs, ConcurrentWhatIfsOnOneSnapshotAnswerAsOneAtATime) {
  Extender ext;
  ClusterState state = Cluster();
  state.node_labels = RackLabels();
  state.placed_pods["resnet-ddp"] = {"gpu-a1"};
  ext.UpdateState(state);
  const std::string names = Fixture("prioritize_node_names.json");
  const std::string full = Fixture("filter_full_nodes.json");
  const std::string alone = ext.HandlePrioritize(names).body;
  const std::string alone_full = ext.HandlePrioritize(full).body;
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> differ{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const bool by_name = (t + i) % 2 == 0;
        const ExtenderResponse r = ext.HandlePrioritize(by_name ? names : full);
        if (r.body != (by_name ? alone : alone_full)) differ.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(differ.load(), 0) << "answers changed when requests overlapped";
}

TEST(ExtenderRoutes, MountedOnAnHttplibServerAtThePrefix) {
  Extender ext;
  ext.UpdateState(Cluster());
  httplib::Server server;
  RegisterRoutes(server, ext);
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { server.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  auto f = client.Post("/extender/filter", Fixture("filter_full_nodes.json"), "application/json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 200);
  EXPECT_EQ(f->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Json::parse(f->body)["FailedNodes"].size(), 2u);
  auto p = client.Post("/extender/prioritize", Fixture("prioritize_node_names.json"),
                       "application/json");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 200);
  EXPECT_TRUE(Json::parse(p->body).is_array());
  auto bad = client.Post("/extender/prioritize", "{", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  server.stop();
  t.join();

  httplib::Server other;
  RegisterRoutes(other, ext, "/scheduler/extender");
  const int port2 = other.bind_to_any_port("127.0.0.1");
  std::thread t2([&] { other.listen_after_bind(); });
  httplib::Client c2("127.0.0.1", port2);
  auto r =
      c2.Post("/scheduler/extender/filter", Fixture("filter_full_nodes.json"), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  other.stop();
  t2.join();
}

// A stand-in for metronome-scheduler's HttpServer: Post(name, pattern, handler).
struct NamedServer {
  std::map<std::string,
           std::pair<std::string, std::function<void(const httplib::Request&, httplib::Response&)>>>
      routes;
  void Post(const std::string& name, const std::string& pattern,
            std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    routes[name] = {pattern, std::move(handler)};
  }
};

TEST(ExtenderRoutes, NamedRoutesForTheServiceServer) {
  Extender ext;
  ext.UpdateState(Cluster());
  NamedServer server;
  RegisterNamedRoutes(server, ext);
  ASSERT_EQ(server.routes.size(), 2u);
  EXPECT_EQ(server.routes["extender_filter"].first, "/extender/filter");
  EXPECT_EQ(server.routes["extender_prioritize"].first, "/extender/prioritize");
  httplib::Request req;
  req.body = "nonsense";
  httplib::Response res;
  server.routes["extender_filter"].second(req, res);
  EXPECT_EQ(res.status, 400);
  req.body = Fixture("prioritize_node_names.json");
  server.routes["extender_prioritize"].second(req, res);
  EXPECT_EQ(res.status, 200);
  EXPECT_TRUE(Json::parse(res.body).is_array());
}

TEST(ExtenderModels, GpuLabelsMapToModelTableKeys) {
  // Through the verbs: a V100 node makes ResNet-50's compute longer than on an A100; both are
  // answered (the table knows both), so scoring happens on each.
  Extender ext;
  ClusterState state = Cluster();
  state.node_labels = RackLabels();
  state.node_labels["gpu-b1"]["nvidia.com/gpu.product"] = "Tesla-V100-SXM2-16GB";
  ext.UpdateState(state);
  const auto s = Scores(ext.HandlePrioritize(Fixture("prioritize_node_names.json")).body);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(ext.Stats().pods_without_profile, 0u);
}

}  // namespace
}  // namespace metronome::extender
