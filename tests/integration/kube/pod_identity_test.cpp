// A shim's identity checked against the API server, end to end: the fake API server's pods →
// kube::Cache (pods with spec.schedulerName metronome) → KubernetesSync → the service's check of
// each hello, as a shim meets it over ZeroMQ.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "fake_apiserver.hpp"
#include "metronome/common/protocol.hpp"
#include "metronome/extender/extender.hpp"
#include "metronome/service/kubernetes.hpp"
#include "metronome/service/service.hpp"

namespace metronome::service {
namespace {

using namespace std::chrono_literals;
using kube::testing::FakeApiServer;
using Json = nlohmann::json;

// A training pod as the inject-shim component makes it, placed and running.
Json TrainingPod(const std::string& ns, const std::string& name, const std::string& job,
                 const std::string& node, const std::string& priority_class, int64_t priority) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"uid", "uid-" + name},
            {"labels", {{"job-name", job}}},
            {"annotations", {{"metronome.dev/priority", "high"}}}}},
          {"spec",
           {{"schedulerName", "metronome"},
            {"nodeName", node},
            {"priorityClassName", priority_class},
            {"priority", priority}}},
          {"status", {{"phase", "Running"}}}};
}

proto::Hello HelloFrom(const std::string& ns, const std::string& pod, const std::string& job,
                       const std::string& node, uint32_t rank) {
  proto::Hello h;
  h.job_id = job;
  h.node = node;
  h.rank = rank;
  h.world_size = 2;
  h.priority = 2;  // what the environment claims (METRONOME_PRIORITY=high)
  h.pod_namespace = ns;
  h.pod_name = pod;
  h.pod_uid = "uid-" + pod;
  return h;
}

class PodIdentityEndToEnd : public ::testing::Test {
 protected:
  PodIdentityEndToEnd()
      : svc_(Config()),
        extender_(ExtenderConfigFor(Config().kubernetes), nullptr),
        sync_(svc_, extender_, Config().kubernetes) {}

  static ServiceConfig Config() {
    ServiceConfig cfg;
    cfg.listen = "tcp://127.0.0.1:*";
    cfg.http = "127.0.0.1:0";
    cfg.log_level = "warn";
    cfg.controller.offline_interval_ms = 0;
    cfg.kubernetes.enabled = true;
    return cfg;
  }

  void StartAll() {
    svc_.Start();
    sync_.Start(kube::testing::ClientConfigFor(api_));
  }

  // The reply to one hello from a fresh DEALER: "welcome" or the Error's message.
  std::string Say(const proto::Hello& h) {
    zmq::socket_t s(ctx_, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(svc_.ZmqEndpoint());
    s.send(zmq::buffer(proto::Encode(h)), zmq::send_flags::none);
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, 2000ms) <= 0) return "(no reply)";
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) return "(no reply)";
    const proto::Decoded d = proto::Decode(m.data(), m.size());
    if (!d.Ok()) return "(undecodable)";
    if (std::holds_alternative<proto::Welcome>(d.message)) return "welcome";
    if (const auto* e = std::get_if<proto::Error>(&d.message)) return e->message;
    return "(other)";
  }

  // Retries a hello until its reply starts with `want` (the cache follows the API server).
  bool EventuallySays(const proto::Hello& h, const std::string& want, std::string* last) {
    for (int i = 0; i < 100; ++i) {
      *last = Say(h);
      if (last->rfind(want, 0) == 0) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  FakeApiServer api_;
  Service svc_;
  extender::Extender extender_;
  KubernetesSync sync_;
  zmq::context_t ctx_;
};

TEST_F(PodIdentityEndToEnd, HellosAreCheckedAgainstThePodsTheApiServerKnows) {
  api_.Put("pods", "team-a",
           TrainingPod("team-a", "bert-0", "bert", "gpu-1", "training-low", -100));
  api_.Put("pods", "team-a",
           TrainingPod("team-a", "bert-1", "bert", "gpu-2", "training-low", -100));
  // Scheduled by the default scheduler: not a pod the scheduler watches.
  Json other = TrainingPod("team-b", "web-0", "web", "gpu-1", "", 0);
  other["spec"]["schedulerName"] = "default-scheduler";
  api_.Put("pods", "team-b", other);
  StartAll();
  std::string last;
  ASSERT_TRUE(EventuallySays(HelloFrom("team-a", "bert-0", "bert", "gpu-1", 0), "welcome", &last))
      << last;
  // The environment claimed high; the PriorityClass's value (-100) maps to low.
  EXPECT_EQ(svc_.JobJson("bert").value()["priority"], extender::kPriorityLow);
  EXPECT_EQ(svc_.JobJson("bert").value()["namespace"], "team-a");
  EXPECT_EQ(Say(HelloFrom("team-b", "web-0", "web", "gpu-1", 0)).rfind("pod_unknown", 0), 0u);
  EXPECT_EQ(Say(HelloFrom("team-a", "bert-1", "bert", "gpu-1", 1)).rfind("pod_node", 0), 0u);
  proto::Hello forged = HelloFrom("team-a", "bert-1", "bert", "gpu-2", 1);
  forged.pod_uid = "uid-guessed";
  EXPECT_EQ(Say(forged).rfind("pod_uid", 0), 0u);
  EXPECT_EQ(Say(HelloFrom("team-a", "bert-1", "bert", "gpu-2", 1)), "welcome");

  // The pod is deleted and made again under the same name (a new UID): the old identity no
  // longer registers; a pod that appears later does.
  api_.Remove("pods", "team-a", "bert-1");
  ASSERT_TRUE(
      EventuallySays(HelloFrom("team-a", "bert-1", "bert", "gpu-2", 1), "pod_unknown", &last))
      << last;
  api_.Put("pods", "team-a",
           TrainingPod("team-a", "gpt-0", "gpt", "gpu-3", "training-high", 1'000'000));
  ASSERT_TRUE(EventuallySays(HelloFrom("team-a", "gpt-0", "gpt", "gpu-3", 0), "welcome", &last))
      << last;
  EXPECT_EQ(svc_.JobJson("gpt").value()["priority"], extender::kPriorityHigh);
  sync_.Stop();
  svc_.Stop();
}

// Until the first list from the API server arrives nothing registers (the shims run ungated and
// retry their hello every second).
TEST_F(PodIdentityEndToEnd, NothingRegistersBeforeThePodsAreRead) {
  svc_.Start();
  EXPECT_EQ(Say(HelloFrom("team-a", "bert-0", "bert", "gpu-1", 0)).rfind("pod_unknown", 0), 0u);
  svc_.Stop();
}

// What the API server side meets shows on /metrics: the lists of each watched resource, a
// request answered 500 and retried, and a TrafficProfile that does not parse (left out).
TEST_F(PodIdentityEndToEnd, ApiServerTroublesShowOnMetrics) {
  api_.Put("trafficprofiles", "default",
           {{"metadata", {{"name", "broken"}, {"namespace", "default"}}},
            {"spec", {{"periodMs", 200}}}});  // no jobName
  api_.FailNext(1, 500);
  StartAll();
  Metrics& m = svc_.GetMetrics();
  const std::vector<std::string> wanted = {
      "metronome_kube_unreadable_objects{kind=\"TrafficProfile\"} 1",
      "metronome_kube_lists_total{resource=\"nodes\"} 1",
      "metronome_kube_lists_total{resource=\"trafficprofiles\"} 1",
      "metronome_kube_lists_total{resource=\"pods\"} 1"};
  const auto all_there = [&](const std::string& text) {
    for (const std::string& w : wanted) {
      if (text.find(w) == std::string::npos) return false;
    }
    return true;
  };
  std::string text = m.Serialize();
  for (int i = 0; i < 250 && !all_there(text); ++i) {
    std::this_thread::sleep_for(20ms);
    text = m.Serialize();
  }
  EXPECT_TRUE(all_there(text)) << text;
  EXPECT_EQ(m.CounterTotal("metronome_kube_request_retries_total"), 1);
  sync_.Stop();
  EXPECT_EQ(m.Serialize().find("metronome_kube_"), std::string::npos)
      << "the collector outlived the sync";
  svc_.Stop();
}

// A burst of watch events (here 300 node updates) costs a few rebuilds of the extender's
// snapshot, not one each: the watch threads ask, one refresher thread rebuilds at most every
// 100 ms.
TEST_F(PodIdentityEndToEnd, ABurstOfWatchEventsCostsAFewRebuilds) {
  StartAll();
  const auto node = [](int version) {
    return Json{
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", "gpu-1"}, {"labels", {{"metronome.dev/rack", "r" + std::to_string(version)}}}}}};
  };
  api_.Put("nodes", "", node(0));
  std::this_thread::sleep_for(300ms);
  const uint64_t before = extender_.Stats().snapshot_rebuilds;
  constexpr int kEvents = 300;
  for (int i = 1; i <= kEvents; ++i) api_.Put("nodes", "", node(i));
  std::this_thread::sleep_for(500ms);
  const uint64_t rebuilds = extender_.Stats().snapshot_rebuilds - before;
  EXPECT_GE(rebuilds, 1u);
  EXPECT_LT(rebuilds, static_cast<uint64_t>(kEvents) / 5) << "one rebuild per event";
  sync_.Stop();
  svc_.Stop();
}

}  // namespace
}  // namespace metronome::service
