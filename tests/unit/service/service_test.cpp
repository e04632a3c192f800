// The service embedded in-process (as another component would host it): wildcard ports, the
// plan listener that the extender uses to follow the plan, and a clean stop.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "metronome/common/protocol.hpp"
#include "metronome/service/service.hpp"
#include "recv_message.hpp"

namespace metronome::service {
namespace {

TEST(Service, EmbeddedWithWildcardPortsNotifiesPlanChanges) {
  ServiceConfig cfg;
  cfg.listen = "tcp://127.0.0.1:*";
  cfg.http = "127.0.0.1:0";
  cfg.log_level = "warn";
  cfg.controller.offline_interval_ms = 0;
  Service svc(cfg);
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
  proto::Hello h;
  h.job_id = "j";
  h.world_size = 2;
  h.node = "n0";
  a.send(zmq::buffer(proto::Encode(h)), zmq::send_flags::none);
  h.rank = 1;
  h.node = "n1";
  b.send(zmq::buffer(proto::Encode(h)), zmq::send_flags::none);
  ASSERT_TRUE(Recv(a));
  ASSERT_TRUE(Recv(b));
  proto::ProfileReport r;
  r.job_id = "j";
  r.period_ns = 100'000'000;
  r.comm_ns = 25'000'000;
  r.confidence = 1.0;
  a.send(zmq::buffer(proto::Encode(r)), zmq::send_flags::none);
  auto push = Recv(a);
  ASSERT_TRUE(push && std::holds_alternative<proto::TimetablePush>(*push));

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
  EXPECT_GE(v.jobs[0].timetable.period_ns, 100'000'000);
  EXPECT_EQ(v.topology.unknown_nodes_link, "default");
  EXPECT_EQ(svc.StatusJson()["jobs_planned"], 1);
  svc.Stop();
}

// HttpServer::Serve: one request from memory through httplib's parsing and the routes, as a
// connection would send it (the HTTP fuzz target's way in). A path that quotes bytes that are
// not UTF-8 still gets a JSON error reply; nothing needs the service started.
TEST(Service, HttpRequestsServedFromMemory) {
  ServiceConfig cfg;
  cfg.listen = "tcp://127.0.0.1:*";
  cfg.http = "127.0.0.1:0";
  cfg.log_level = "warn";
  Service svc(cfg);
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
