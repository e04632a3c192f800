// The service embedded in-process (as another component would host it): wildcard ports, the
// plan listener that the extender uses to follow the plan, and a clean stop.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "metronome/common/protocol.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/service/service.hpp"
#include "recv_message.hpp"

namespace metronome::service {
namespace {

constexpr int64_t kMs = 1'000'000;

// The service embedded on wildcard ports, without the background search.
ServiceConfig Embedded() {
  ServiceConfig cfg;
  cfg.listen = "tcp://127.0.0.1:*";
  cfg.http = "127.0.0.1:0";
  cfg.log_level = "warn";
  cfg.controller.offline_interval_ms = 0;
  return cfg;
}

// A shim's side: the hello of `rank` of a job of two ranks from `node` (true when welcomed),
// its profile report, the timetable pushed to it.
bool SayHello(zmq::socket_t& s, const std::string& job, uint32_t rank, const std::string& node) {
  proto::Hello h;
  h.job_id = job;
  h.rank = rank;
  h.world_size = 2;
  h.node = node;
  s.send(zmq::buffer(proto::Encode(h)), zmq::send_flags::none);
  return Recv(s).has_value();
}
void SendReport(zmq::socket_t& s, const std::string& job, int64_t period_ns, int64_t comm_ns) {
  proto::ProfileReport r;
  r.job_id = job;
  r.period_ns = period_ns;
  r.comm_ns = comm_ns;
  r.confidence = 1.0;
  s.send(zmq::buffer(proto::Encode(r)), zmq::send_flags::none);
}
std::optional<Timetable> RecvPush(zmq::socket_t& s) {
  std::optional<proto::Message> m = Recv(s);
  if (!m || !std::holds_alternative<proto::TimetablePush>(*m)) return std::nullopt;
  return std::get<proto::TimetablePush>(*m).timetable;
}

TEST(Service, EmbeddedWithWildcardPortsNotifiesPlanChanges) {
  Service svc(Embedded());
  std::mutex mu;
  std::vector<ClusterView> views;
  svc.SetPlanListener([&](const ClusterView& v) {
    std::lock_guard lock(mu);
    views.push_back(v);
  });
  svc.Start();
  EXPECT_NE(svc.ZmqEndpoint().find("tcp://127.0.0.1:"), std::string::npos);
  EXPECT_GT(svc.HttpPort(), 0);

  zmq::context_t ctx;
  zmq::socket_t a(ctx, zmq::socket_type::dealer), b(ctx, zmq::socket_type::dealer);
  a.connect(svc.ZmqEndpoint());
  b.connect(svc.ZmqEndpoint());
  ASSERT_TRUE(SayHello(a, "j", 0, "n0") && SayHello(b, "j", 1, "n1"));
  SendReport(a, "j", 100 * kMs, 25 * kMs);
  ASSERT_TRUE(RecvPush(a));

  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(mu);
      if (!views.empty() && !views.back().jobs.empty() && views.back().jobs[0].planned) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::lock_guard lock(mu);
  ASSERT_FALSE(views.empty());
  const ClusterView& v = views.back();
  ASSERT_EQ(v.jobs.size(), 1u);
  EXPECT_EQ(v.jobs[0].name, "j");
  EXPECT_EQ(v.jobs[0].nodes, (std::vector<std::string>{"n0", "n1"}));
  // Alone on its link the job is not gated: its window is its whole period.
  EXPECT_EQ(v.jobs[0].timetable.window_ns, v.jobs[0].timetable.period_ns);
  EXPECT_GE(v.jobs[0].timetable.period_ns, 100 * kMs);
  EXPECT_EQ(v.topology.unknown_nodes_link, "default");
  EXPECT_EQ(svc.StatusJson()["jobs_planned"], 1);
  svc.Stop();
}

// A scheduler that takes over (InheritPlan) plans a job the previous leader ran gated only once
// its ranks' hellos give it links. Its ranks come back one at a time: a plan made when only the
// first had said hello would cross no link, and replace the job's slot with an open timetable
// that the job's shims would run until its second rank came back.
TEST(Service, AnInheritedJobWaitsForItsLinksAndKeepsItsSlot) {
  controller::PlanningAdapter old_leader(controller::TopologyConfig::Default(), {});
  for (const uint64_t id : {1, 2}) {
    controller::PlanJob j;
    j.id = id;
    j.name = id == 1 ? "first" : "second";
    j.nodes = {"n" + std::to_string(2 * id), "n" + std::to_string(2 * id + 1)};
    j.profile.period_ns = 100 * kMs;
    j.profile.comm_ns = 30 * kMs;
    old_leader.AddJob(j);
  }
  std::map<std::string, Timetable> ran;
  for (const auto& j : old_leader.Summary().jobs) ran[j.id == 1 ? "first" : "second"] = j.timetable;
  ASSERT_NE(ran["first"].offset_ns, ran["second"].offset_ns);

  Service svc(Embedded());
  svc.InheritPlan(ran, 60'000);
  svc.Start();
  zmq::context_t ctx;
  std::map<std::string, zmq::socket_t> nodes;  // a shim on each
  const auto on = [&](const std::string& node) -> zmq::socket_t& {
    auto [it, fresh] = nodes.try_emplace(node, ctx, zmq::socket_type::dealer);
    if (fresh) it->second.connect(svc.ZmqEndpoint());
    return it->second;
  };

  // The first job comes back whole, and is planned (alone on the link for now: not gated).
  ASSERT_TRUE(SayHello(on("n2"), "first", 0, "n2") && SayHello(on("n3"), "first", 1, "n3"));
  SendReport(on("n2"), "first", 100 * kMs, 30 * kMs);
  ASSERT_TRUE(RecvPush(on("n2")));

  // The second job's first rank reports before its second rank's hello: the report is taken
  // (the job has its profile) and the join held, so no plan and no push.
  ASSERT_TRUE(SayHello(on("n4"), "second", 0, "n4"));
  SendReport(on("n4"), "second", 100 * kMs, 30 * kMs);
  nlohmann::json job;
  for (int i = 0; i < 200; ++i) {
    job = svc.JobJson("second").value_or(nlohmann::json{});
    if (job.contains("profile") && !job["profile"].is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(job.value("planned", true)) << job.dump();
  EXPECT_NE(job.dump().find("join_held"), std::string::npos) << job.dump();

  // Its second rank's hello gives it its link: it is planned, in its slot.
  ASSERT_TRUE(SayHello(on("n5"), "second", 1, "n5"));
  const std::optional<Timetable> got = RecvPush(on("n4"));
  const Timetable& was = ran.at("second");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->period_ns, was.period_ns);
  EXPECT_EQ(got->window_ns, was.window_ns);
  EXPECT_EQ(got->offset_ns % got->period_ns, was.offset_ns % was.period_ns);
  svc.Stop();
}

// The wait is bounded: a job whose other ranks never come back is planned when the inherited
// plan expires, on the links it has.
TEST(Service, AnInheritedJobWithoutLinksIsPlannedWhenTheWaitEnds) {
  Service svc(Embedded());
  svc.InheritPlan({{"lone", Timetable{0, 0, 100 * kMs, 40 * kMs, 30 * kMs, 0, 100 * kMs}}}, 1000);
  svc.Start();
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.connect(svc.ZmqEndpoint());
  ASSERT_TRUE(SayHello(s, "lone", 0, "n0"));
  SendReport(s, "lone", 100 * kMs, 30 * kMs);
  ASSERT_TRUE(RecvPush(s));
  const std::string decisions = svc.JobJson("lone").value_or(nlohmann::json{})["decisions"].dump();
  EXPECT_NE(decisions.find("join_held"), std::string::npos) << decisions;
  EXPECT_NE(decisions.find("join_released"), std::string::npos) << decisions;
  svc.Stop();
}

// HttpServer::Serve: one request from memory through httplib's parsing and the routes, as a
// connection would send it (the HTTP fuzz target's way in). A path that quotes bytes that are
// not UTF-8 still gets a JSON error reply; nothing needs the service started.
TEST(Service, HttpRequestsServedFromMemory) {
  Service svc(Embedded());
  const auto body_of = [](const std::string& reply) {
    return nlohmann::json::parse(reply.substr(reply.find("\r\n\r\n") + 4));
  };
  std::string reply = svc.Http().Serve("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_EQ(body_of(reply)["status"], "ok");

  reply = svc.Http().Serve("GET /api/v1/jobs/%87%FFx HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(reply.rfind("HTTP/1.1 404", 0), 0u) << reply;
  const nlohmann::json error = body_of(reply);
  EXPECT_EQ(error["error"], "unknown_job");
  EXPECT_NE(error["message"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos);

  reply = svc.Http().Serve("NOT A REQUEST\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
}

}  // namespace
}  // namespace metronome::service
