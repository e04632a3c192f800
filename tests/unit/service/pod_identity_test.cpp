// The Kubernetes integration's check of a shim's hello against the pod it names: the pure rule
// (CheckHelloAgainstPods), then through the service as a shim meets it (an Error naming the
// reason, counted; the priority and namespace of the pod).
#include "pod_identity.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <zmq.hpp>

#include "metronome/common/protocol.hpp"
#include "metronome/service/service.hpp"
#include "recv_message.hpp"

namespace metronome::service {
namespace {

extender::PodInfo Pod(const std::string& ns, const std::string& name, const std::string& job,
                      const std::string& node, int priority = extender::kPriorityNormal) {
  extender::PodInfo p;
  p.namespace_name = ns;
  p.name = name;
  p.uid = "uid-" + name;
  p.job = job;
  p.node_name = node;
  p.phase = "Running";
  p.admitted_priority = priority;
  return p;
}

PodDirectory Pods() {
  PodDirectory d;
  for (auto p : {Pod("team-a", "bert-0", "bert", "gpu-1", extender::kPriorityHigh),
                 Pod("team-a", "bert-1", "bert", "gpu-2", extender::kPriorityHigh),
                 Pod("team-b", "gpt-0", "gpt", "gpu-1", extender::kPriorityLow),
                 Pod("team-b", "bert-0", "bert", "gpu-3", extender::kPriorityHigh)}) {
    d.emplace(p.namespace_name + "/" + p.name, p);
  }
  d["team-a/done-0"] = Pod("team-a", "done-0", "done", "gpu-1");
  d["team-a/done-0"].phase = "Succeeded";
  return d;
}

proto::Hello HelloFrom(const std::string& ns, const std::string& pod, const std::string& job,
                       const std::string& node, uint32_t rank = 0) {
  proto::Hello h;
  h.job_id = job;
  h.node = node;
  h.rank = rank;
  h.world_size = 2;
  h.priority = extender::kPriorityLow;  // what the pod's environment claims
  h.pod_namespace = ns;
  h.pod_name = pod;
  h.pod_uid = "uid-" + pod;
  return h;
}

TEST(PodIdentity, AHelloThatMatchesItsPodTakesThePodsPriority) {
  const PodDirectory pods = Pods();
  const HelloVerdict v =
      CheckHelloAgainstPods(HelloFrom("team-a", "bert-0", "bert", "gpu-1"), &pods);
  EXPECT_EQ(v.reason, "") << v.message;
  EXPECT_EQ(v.priority, extender::kPriorityHigh);
  EXPECT_EQ(v.job_namespace, "team-a");
}

TEST(PodIdentity, EveryMismatchIsRefusedWithItsReason) {
  const PodDirectory pods = Pods();
  const auto reason = [&](proto::Hello h) { return CheckHelloAgainstPods(h, &pods).reason; };
  proto::Hello h = HelloFrom("team-a", "bert-0", "bert", "gpu-1");
  h.pod_uid.clear();
  EXPECT_EQ(reason(h), "pod_missing");
  h = HelloFrom("", "bert-0", "bert", "gpu-1");
  EXPECT_EQ(reason(h), "pod_missing");
  EXPECT_EQ(reason(HelloFrom("team-a", "nobody", "bert", "gpu-1")), "pod_unknown");
  h = HelloFrom("team-a", "bert-0", "bert", "gpu-1");
  h.pod_uid = "uid-of-a-deleted-pod-of-that-name";
  EXPECT_EQ(reason(h), "pod_uid");
  EXPECT_EQ(reason(HelloFrom("team-a", "bert-0", "bert", "gpu-2")), "pod_node");
  // A pod of one job reporting under another job's name.
  EXPECT_EQ(reason(HelloFrom("team-b", "gpt-0", "bert", "gpu-1")), "pod_job");
  EXPECT_EQ(reason(HelloFrom("team-a", "done-0", "done", "gpu-1")), "pod_finished");
  // Before the first list from the API server nothing can be checked.
  const HelloVerdict none =
      CheckHelloAgainstPods(HelloFrom("team-a", "bert-0", "bert", "gpu-1"), nullptr);
  EXPECT_EQ(none.reason, "pod_unknown");
  EXPECT_NE(none.message.find("not read pods"), std::string::npos) << none.message;
}

// What a shim meets: the refusal as an Error naming the reason (it retries its hello every
// second and runs ungated meanwhile), each counted; an accepted rank's job has the pod's priority
// and belongs to the pod's namespace, where a pod of the same job name in another namespace
// cannot join it.
TEST(PodIdentity, TheServiceRefusesAndCountsWhatDoesNotMatch) {
  ServiceConfig cfg;
  cfg.listen = "tcp://127.0.0.1:*";
  cfg.http = "127.0.0.1:0";
  cfg.log_level = "off";
  cfg.controller.offline_interval_ms = 0;
  Service svc(cfg);
  svc.EnablePodCheck();
  svc.Start();
  zmq::context_t ctx;
  const auto say = [&](const proto::Hello& h) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(svc.ZmqEndpoint());
    s.send(zmq::buffer(proto::Encode(h)), zmq::send_flags::none);
    return Recv(s);
  };
  const auto error_of = [](const std::optional<proto::Message>& m) {
    const auto* e = m ? std::get_if<proto::Error>(&*m) : nullptr;
    return e != nullptr ? e->message : std::string("(no error)");
  };
  // No pods yet.
  EXPECT_EQ(error_of(say(HelloFrom("team-a", "bert-0", "bert", "gpu-1"))).rfind("pod_unknown", 0),
            0u);
  svc.SetPods(Pods());
  const auto welcome = say(HelloFrom("team-a", "bert-0", "bert", "gpu-1"));
  ASSERT_TRUE(welcome && std::holds_alternative<proto::Welcome>(*welcome)) << error_of(welcome);
  EXPECT_EQ(svc.JobJson("bert").value()["priority"], extender::kPriorityHigh);
  EXPECT_EQ(svc.JobJson("bert").value()["namespace"], "team-a");
  EXPECT_EQ(error_of(say(HelloFrom("team-a", "bert-1", "bert", "gpu-1"))).rfind("pod_node", 0), 0u);
  EXPECT_EQ(error_of(say(HelloFrom("team-b", "bert-0", "bert", "gpu-3", 1)))
                .rfind("pod_namespace: job bert belongs to namespace 'team-a'", 0),
            0u);
  EXPECT_EQ(error_of(say(HelloFrom("team-b", "gpt-0", "bert", "gpu-1", 1))).rfind("pod_job", 0),
            0u);
  EXPECT_EQ(svc.JobJson("bert").value()["ranks"], 1);
  const std::string metrics = svc.Http().Serve("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  for (const char* reason : {"pod_unknown", "pod_node", "pod_namespace", "pod_job"}) {
    EXPECT_NE(
        metrics.find(std::string("metronome_rejected_messages_total{reason=\"") + reason + "\"} 1"),
        std::string::npos)
        << reason;
  }
  svc.Stop();
}

}  // namespace
}  // namespace metronome::service
