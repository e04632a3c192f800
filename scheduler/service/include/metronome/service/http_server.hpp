// The scheduler's HTTP server (cpp-httplib) and the way route groups plug into it.
//
// A route group (the status API, the timeline page, later the kube-scheduler extender at
// /extender/...) implements RouteGroup::Register and adds its routes with Get/Post. Every route
// gets the same treatment: its latency and status are counted under its name; a handler that
// throws HttpError answers a JSON error {"error": reason, "message": ...} with that status and
// counts it as rejected; any other exception becomes a 500; unknown paths and methods get a JSON
// 404/405. Handlers run on httplib's worker threads and must do their own locking. With
// EnableTls the same routes are served over HTTPS only.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "metronome/service/metrics.hpp"

namespace metronome::service {

// Thrown by handlers to answer a JSON error.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string reason, const std::string& message)
      : std::runtime_error(message), status_(status), reason_(std::move(reason)) {}
  int Status() const { return status_; }
  const std::string& Reason() const { return reason_; }

 private:
  int status_;
  std::string reason_;
};

class HttpServer;
class TlsContext;
struct HttpTlsConfig;
class ClientRateLimit;

class RouteGroup {
 public:
  virtual ~RouteGroup() = default;
  virtual void Register(HttpServer& server) = 0;
};

class HttpServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit HttpServer(Metrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `name` labels the route in metrics; `pattern` is httplib's regex (captures in req.matches).
  // GET routes reject a request body (400 "body_not_allowed").
  void Get(const std::string& name, const std::string& pattern, Handler handler);
  void Post(const std::string& name, const std::string& pattern, Handler handler);
  void AddRouteGroup(std::shared_ptr<RouteGroup> group);

  // Serves HTTPS instead of HTTP (the http.tls_* keys): reads the certificate, key and optional
  // client CA now (a client CA makes client certificates mandatory), and the certificate and key
  // again whenever their files change. Throws ConfigError naming the key of a missing or bad
  // file; std::logic_error after Start(). Routes added before or after it are all served.
  void EnableTls(const HttpTlsConfig& config);
  bool Tls() const { return tls_ != nullptr; }

  // At most `per_second` requests a second from one client address, in bursts of up to twice
  // that (http.rate_limit; 0: no limit); beyond it every route answers 429 "rate_limited" with
  // Retry-After, counted. Before Start().
  void LimitRate(double per_second);

  // Binds and serves on a background thread. Throws std::runtime_error when it cannot bind.
  void Start(const std::string& host, int port);
  void Stop();
  int Port() const { return port_; }

  // Serves one request read from `request` (the bytes a client would send) and returns the
  // bytes of the reply, through the same parsing, limits, routes and error replies as a
  // connection gets, without a socket (the HTTP fuzz target, tests). Thread-safe like the
  // routes; not with TLS (std::logic_error).
  std::string Serve(std::string_view request, const std::string& remote_addr = "127.0.0.1");

  // Helpers for handlers.
  static void ReplyJson(httplib::Response& res, const std::string& body, int status = 200);
  static std::string ErrorBody(const std::string& reason, const std::string& message);

 private:
  struct Route {
    std::string name;
    std::string pattern;
    std::string method;
    Handler handler;  // wrapped
  };
  void Configure(httplib::Server& server);  // limits, timeouts, error handlers
  void Add(const std::string& name, const std::string& pattern, const std::string& method,
           Handler handler);
  static void Mount(httplib::Server& server, const Route& route);
  Handler Wrap(const std::string& name, const std::string& method, Handler handler);
  void Reject(const std::string& route, httplib::Response& res, int status,
              const std::string& reason, const std::string& message);

  Metrics& metrics_;
  std::unique_ptr<ClientRateLimit> rate_limit_;  // null: no limit
  std::unique_ptr<TlsContext> tls_;              // outlives server_, whose SSL context calls it
  std::unique_ptr<httplib::Server> server_;
  std::vector<Route> routes_;
  std::vector<std::shared_ptr<RouteGroup>> groups_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace metronome::service
