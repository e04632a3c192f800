// The Kubernetes side of the extender, end to end on loopback: a fake API server holds Nodes
// (rack labels), a TrafficProfile and the bound pods of a running job; kube::Cache keeps copies;
// ApplyKubeInputs turns them into the extender's state; the extender is mounted on an httplib
// server and asked as kube-scheduler would ask (nodeCacheCapable: true, names only).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "fake_apiserver.hpp"
#include "metronome/extender/extender.hpp"
#include "metronome/extender/kube_inputs.hpp"
#include "metronome/kube/cache.hpp"

namespace metronome {
namespace {

using Json = nlohmann::json;
using kube::testing::FakeApiServer;
using namespace std::chrono_literals;

Json Node(const std::string& name, const std::string& rack) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"metronome.dev/rack", rack}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}

Json Pod(const std::string& name, const std::string& job, const std::string& node,
         const std::string& priority) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", "default"},
              {"labels", {{"job-name", job}}},
              {"annotations", {{"metronome.dev/priority", priority}}}}},
            {"spec", {{"schedulerName", "metronome"}, {"containers", Json::array()}}},
            {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

template <typename Pred>
bool WaitFor(Pred pred) {
  for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(10ms);
  return pred();
}

TEST(ExtenderPipeline, KubeObjectsToExtenderAnswers) {
  FakeApiServer api;
  for (const auto& [n, r] : std::vector<std::pair<std::string, std::string>>{
           {"a1", "rack-a"}, {"a2", "rack-a"}, {"b1", "rack-b"}, {"b2", "rack-b"}}) {
    api.Put("nodes", "", Node(n, r));
  }
  // A high-priority job, declared busy (150 ms of every 200 ms on the wire at 100 Gbit/s), on
  // a1 + a2; its pods are bound.
  api.Put("trafficprofiles", "default",
          {{"metadata", {{"name", "hp"}, {"namespace", "default"}}},
           {"spec",
            {{"jobName", "hp"}, {"periodMs", 200}, {"gradientMB", 1788.0}, {"priority", "high"}}}});
  api.Put("pods", "default", Pod("hp-0", "hp", "a1", "high"));
  api.Put("pods", "default", Pod("hp-1", "hp", "a2", "high"));
  // A low-priority job with one pod on b2, declared at 100 ms of every 200 ms.
  api.Put("trafficprofiles", "default",
          {{"metadata", {{"name", "lp"}, {"namespace", "default"}}},
           {"spec", {{"jobName", "lp"}, {"periodMs", 200}, {"gradientMB", 1192.1}}}});
  api.Put("pods", "default", Pod("lp-0", "lp", "b2", "low"));

  kube::ClientConfig cfg;
  cfg.server = api.Url();
  cfg.token = api.Token();
  kube::Client client(cfg);
  kube::ListOptions metronome_pods;
  metronome_pods.field_selector = "spec.schedulerName=metronome";
  kube::Cache nodes(client, kube::resources::Nodes());
  kube::Cache profiles(client, kube::resources::TrafficProfiles());
  kube::Cache pods(client, kube::resources::Pods(), "", metronome_pods);
  nodes.Start();
  profiles.Start();
  pods.Start();
  ASSERT_TRUE(WaitFor([&] { return nodes.Synced() && profiles.Synced() && pods.Synced(); }));
  ASSERT_TRUE(WaitFor([&] { return pods.Objects().size() == 3; }));

  extender::Extender ext;
  extender::ClusterState state;
  state.version = 1;
  state.network.unknown_nodes_link = "";
  const auto stats =
      extender::ApplyKubeInputs(state, nodes.Objects(), profiles.Objects(), pods.Objects());
  EXPECT_EQ(stats.profiles_skipped, 0);
  EXPECT_EQ(state.placed_pods.at("hp").size(), 2u);
  ext.UpdateState(state);

  httplib::Server server;
  extender::RegisterRoutes(server, ext);
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  httplib::Client kube_scheduler("127.0.0.1", port);
  const Json args = {{"Pod", Pod("lp-1", "lp", "", "low")},
                     {"Nodes", nullptr},
                     {"NodeNames", {"a1", "a2", "b1", "b2"}}};
  auto filter = kube_scheduler.Post("/extender/filter", args.dump(), "application/json");
  ASSERT_TRUE(filter);
  ASSERT_EQ(filter->status, 200) << filter->body;
  const Json f = Json::parse(filter->body);
  EXPECT_EQ(f["NodeNames"], Json({"b1", "b2"}));
  EXPECT_TRUE(f["FailedNodes"].contains("a1"));
  EXPECT_NE(f["FailedNodes"]["a1"].get<std::string>().find("hp (priority 2)"), std::string::npos)
      << f["FailedNodes"]["a1"];

  Json passed = args;
  passed["NodeNames"] = f["NodeNames"];
  auto prio = kube_scheduler.Post("/extender/prioritize", passed.dump(), "application/json");
  ASSERT_TRUE(prio);
  ASSERT_EQ(prio->status, 200) << prio->body;
  const Json p = Json::parse(prio->body);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1]["Host"], "b2");
  EXPECT_EQ(p[1]["Score"], 10);
  EXPECT_EQ(ext.Stats().reused_decisions, 1u);

  server.stop();
  t.join();
  nodes.Stop();
  profiles.Stop();
  pods.Stop();
}

}  // namespace
}  // namespace metronome
