#include "metronome/service/http_server.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <regex>

namespace metronome::service {

namespace {
constexpr size_t kMaxBody = 1 << 20;
}

HttpServer::HttpServer(Metrics& metrics) : metrics_(metrics) {
  server_.set_payload_max_length(kMaxBody);
  server_.set_read_timeout(5, 0);
  server_.set_write_timeout(5, 0);
  server_.set_keep_alive_max_count(100);
  // Requests no route matched (or a method the path does not take), and errors httplib itself
  // produced (413, 400 on a bad request line): a JSON body, counted.
  server_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route's own error reply
    std::string reason = "not_found";
    int status = res.status;
    if (status == 404) {
      for (const auto& r : routes_) {
        if (std::regex_match(req.path, std::regex(r.pattern))) {
          reason = "method_not_allowed";
          status = 405;
          break;
        }
      }
    } else if (status == 413) {
      reason = "body_too_large";
    } else {
      reason = "bad_request";
    }
    metrics_.HttpRequests("unmatched", status).Increment();
    Reject("unmatched", res, status, reason,
           reason == "not_found" ? "no route for " + req.method + " " + req.path
                                 : reason + " (" + req.method + " " + req.path + ")");
  });
  server_.set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Reject("unmatched", res, 500, "internal", what);
      });
}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::ReplyJson(httplib::Response& res, const std::string& body, int status) {
  res.status = status;
  res.set_content(body, "application/json");
}

std::string HttpServer::ErrorBody(const std::string& reason, const std::string& message) {
  return nlohmann::json{{"error", reason}, {"message", message}}.dump();
}

void HttpServer::Reject(const std::string& route, httplib::Response& res, int status,
                        const std::string& reason, const std::string& message) {
  metrics_.HttpRejected(route, reason).Increment();
  ReplyJson(res, ErrorBody(reason, message), status);
  spdlog::debug("http: rejected route={} status={} reason={} message={}", route, status, reason,
                message);
}

HttpServer::Handler HttpServer::Wrap(const std::string& name, const std::string& method,
                                     Handler handler) {
  auto& latency = metrics_.HttpLatency(name);
  return [this, name, method, handler = std::move(handler), &latency](const httplib::Request& req,
                                                                      httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      // httplib does not read a GET's body: refuse it by its headers and close the connection
      // so that the unread bytes are never taken for the next request.
      const bool has_body =
          !req.body.empty() || req.has_header("Transfer-Encoding") ||
          (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
      if (method == "GET" && has_body) {
        res.set_header("Connection", "close");
        throw HttpError(400, "body_not_allowed", "GET " + req.path + " takes no request body");
      }
      handler(req, res);
    } catch (const HttpError& e) {
      Reject(name, res, e.status(), e.reason(), e.what());
    } catch (const std::exception& e) {
      Reject(name, res, 500, "internal", e.what());
    }
    metrics_.HttpRequests(name, res.status).Increment();
    latency.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
}

void HttpServer::Get(const std::string& name, const std::string& pattern, Handler handler) {
  routes_.push_back({name, pattern, "GET"});
  server_.Get(pattern, Wrap(name, "GET", std::move(handler)));
}

void HttpServer::Post(const std::string& name, const std::string& pattern, Handler handler) {
  routes_.push_back({name, pattern, "POST"});
  server_.Post(pattern, Wrap(name, "POST", std::move(handler)));
}

void HttpServer::AddRouteGroup(std::shared_ptr<RouteGroup> group) {
  group->Register(*this);
  groups_.push_back(std::move(group));
}

void HttpServer::Start(const std::string& host, int port) {
  if (port == 0) {
    port_ = server_.bind_to_any_port(host);
  } else {
    port_ = server_.bind_to_port(host, port) ? port : -1;
  }
  if (port_ <= 0) {
    throw std::runtime_error("http: cannot listen on " + host + ":" + std::to_string(port));
  }
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  for (int i = 0; i < 2000 && !server_.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void HttpServer::Stop() {
  if (thread_.joinable()) {
    server_.stop();
    thread_.join();
  }
}

}  // namespace metronome::service
