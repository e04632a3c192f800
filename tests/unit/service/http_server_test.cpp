// The HTTP server's contract for route groups: routes by name, JSON errors, counting.
#include <gtest/gtest.h>

#include "metronome/service/http_server.hpp"

namespace metronome::service {
namespace {

class EchoRoutes : public RouteGroup {
 public:
  void Register(HttpServer& server) override {
    server.Post("echo", "/extender/echo", [](const httplib::Request& req, httplib::Response& res) {
      if (req.body.empty()) throw HttpError(422, "empty", "nothing to echo");
      HttpServer::ReplyJson(res, req.body);
    });
    server.Get("boom", "/boom", [](const httplib::Request&, httplib::Response&) {
      throw std::runtime_error("kaboom");
    });
  }
};

TEST(HttpServer, RouteGroupsPlugInAndErrorsAreJsonAndCounted) {
  Metrics metrics;
  HttpServer server(metrics);
  server.AddRouteGroup(std::make_shared<EchoRoutes>());
  server.Start("127.0.0.1", 0);
  ASSERT_GT(server.Port(), 0);
  httplib::Client c("127.0.0.1", server.Port());
  auto ok = c.Post("/extender/echo", "{\"a\":1}", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "{\"a\":1}");
  auto empty = c.Post("/extender/echo", "", "application/json");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 422);
  EXPECT_EQ(empty->body, R"({"error":"empty","message":"nothing to echo"})");
  auto boom = c.Get("/boom");
  ASSERT_TRUE(boom);
  EXPECT_EQ(boom->status, 500);
  EXPECT_NE(boom->body.find("kaboom"), std::string::npos);
  auto wrong_method = c.Get("/extender/echo");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  auto none = c.Get("/nothing");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_NE(none->body.find("\"error\":\"not_found\""), std::string::npos);
  EXPECT_EQ(metrics.CounterTotal("metronome_http_rejected_total"), 4);
  EXPECT_EQ(metrics.CounterTotal("metronome_http_requests_total"), 5);
  server.Stop();
}

}  // namespace
}  // namespace metronome::service
