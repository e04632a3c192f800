#include "metronome/service/http_server.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "client_rate_limit.hpp"
#include "http_tls.hpp"

namespace metronome::service {

namespace {

constexpr size_t kMaxBody = 1 << 20;

// httplib's server with its per-connection request processing open to Serve().
class PlainServer : public httplib::Server {
 public:
  using httplib::Server::process_request;
};

// A connection in memory: reads what a client sent, collects what the server writes.
class MemoryStream : public httplib::Stream {
 public:
  MemoryStream(std::string_view in, std::string remote) : in_(in), remote_(std::move(remote)) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - at_);
    std::memcpy(ptr, in_.data() + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_;
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 80;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string Take() { return std::move(out_); }

 private:
  std::string_view in_;
  size_t at_ = 0;
  std::string remote_;
  std::string out_;
};

}  // namespace

HttpServer::HttpServer(Metrics& metrics)
    : metrics_(metrics), server_(std::make_unique<PlainServer>()) {
  Configure(*server_);
}

std::string HttpServer::Serve(std::string_view request, const std::string& remote_addr) {
  auto* plain = dynamic_cast<PlainServer*>(server_.get());
  if (plain == nullptr) throw std::logic_error("http: Serve is not for the HTTPS server");
  MemoryStream stream(request, remote_addr);
  bool closed = false;
  plain->process_request(stream, /*close_connection=*/true, closed,
                         [&](httplib::Request& req) { req.remote_addr = remote_addr; });
  return stream.Take();
}

void HttpServer::Configure(httplib::Server& server) {
  server.set_payload_max_length(kMaxBody);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_max_count(100);
  // Without TCP_NODELAY a reply written in two pieces waits for the client's delayed ACK: about
  // 44 ms per call on a kept-alive connection (kube-scheduler's extender calls), 0.1 ms with it.
  server.set_tcp_nodelay(true);
  // A client over its rate is answered before any route runs, matched or not.
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!rate_limit_ || rate_limit_->Allow(req.remote_addr, ClientRateLimit::Clock::now())) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.set_header("Retry-After", "1");
    metrics_.HttpRequests("rate_limited", 429).Increment();
    Reject("rate_limited", res, 429, "rate_limited",
           req.remote_addr + " sent more than " + std::to_string(rate_limit_->PerSecond()) +
               " requests a second (http.rate_limit)");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Requests no route matched (or a method the path does not take), and errors httplib itself
  // produced (413, 400 on a bad request line): a JSON body, counted.
  server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
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
  server.set_exception_handler(
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
  // The message may quote the request (a path, a name) in bytes that are not UTF-8: replaced,
  // so that the reply is JSON whatever came in.
  return nlohmann::json{{"error", reason}, {"message", message}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
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
      Reject(name, res, e.Status(), e.Reason(), e.what());
    } catch (const std::exception& e) {
      Reject(name, res, 500, "internal", e.what());
    }
    metrics_.HttpRequests(name, res.status).Increment();
    latency.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
}

void HttpServer::Get(const std::string& name, const std::string& pattern, Handler handler) {
  Add(name, pattern, "GET", std::move(handler));
}

void HttpServer::Post(const std::string& name, const std::string& pattern, Handler handler) {
  Add(name, pattern, "POST", std::move(handler));
}

void HttpServer::Add(const std::string& name, const std::string& pattern, const std::string& method,
                     Handler handler) {
  routes_.push_back({name, pattern, method, Wrap(name, method, std::move(handler))});
  Mount(*server_, routes_.back());
}

void HttpServer::Mount(httplib::Server& server, const Route& route) {
  if (route.method == "GET") {
    server.Get(route.pattern, route.handler);
  } else {
    server.Post(route.pattern, route.handler);
  }
}

void HttpServer::EnableTls(const HttpTlsConfig& config) {
  if (thread_.joinable()) throw std::logic_error("http: EnableTls after Start");
  // OpenSSL writes to the socket with write(), not send(MSG_NOSIGNAL): a client that hangs up
  // mid-reply (kube-scheduler past its httpTimeout) would raise SIGPIPE and end the process.
  // Ignored, the write fails with EPIPE and only that connection is dropped. A handler the
  // program installed itself is left alone.
  struct sigaction pipe {};
  if (sigaction(SIGPIPE, nullptr, &pipe) == 0 && pipe.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
  auto tls = std::make_unique<TlsContext>(config);
  auto server = std::make_unique<httplib::SSLServer>(
      [&context = *tls](SSL_CTX& ctx) { return context.Configure(ctx); });
  if (!server->is_valid()) {
    throw ConfigError("http.tls_cert_file", "OpenSSL cannot serve the certificate in '" +
                                                config.cert_file + "' with the key in '" +
                                                config.key_file + "'");
  }
  Configure(*server);
  for (const Route& r : routes_) Mount(*server, r);
  server_ = std::move(server);  // the plain server goes first: it never ran
  tls_ = std::move(tls);
  spdlog::info("http: serving HTTPS with {} (client certificates: {})", config.cert_file,
               config.client_ca_file.empty() ? "not asked for"
                                             : "required, signed by " + config.client_ca_file);
}

void HttpServer::AddRouteGroup(std::shared_ptr<RouteGroup> group) {
  group->Register(*this);
  groups_.push_back(std::move(group));
}

void HttpServer::LimitRate(double per_second) {
  if (thread_.joinable()) throw std::logic_error("http: LimitRate after Start");
  rate_limit_ = per_second > 0 ? std::make_unique<ClientRateLimit>(per_second) : nullptr;
}

void HttpServer::Start(const std::string& host, int port) {
  if (port == 0) {
    port_ = server_->bind_to_any_port(host);
  } else {
    port_ = server_->bind_to_port(host, port) ? port : -1;
  }
  if (port_ <= 0) {
    throw std::runtime_error("http: cannot listen on " + host + ":" + std::to_string(port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 2000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void HttpServer::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace metronome::service
