// libFuzzer target for metronome-scheduler's HTTP server: each input is what a client sends on a
// connection (request line, headers, body), served in memory (HttpServer::Serve) through
// httplib's parsing, the service's limits and every route of the status API, the what-if and
// the timeline page. Properties checked on every input: the server returns (no crash, no hang:
// ASan, libFuzzer's timeout); a reply, when there is one, has a status line; no route answers
// 500 (an exception a handler did not turn into a 4xx); a reply that says it is JSON is JSON
// (but for HEAD, which has no body).
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metronome/service/http_server.hpp"
#include "metronome/service/service.hpp"

namespace {

metronome::service::Service& TheService() {
  static metronome::service::Service* service = [] {
    spdlog::set_level(spdlog::level::off);
    metronome::service::ServiceConfig cfg;
    cfg.listen = "tcp://127.0.0.1:*";  // never bound: the service is not started
    cfg.http = "127.0.0.1:0";
    cfg.http_rate_limit = 0;  // one client sends every input
    cfg.log_level = "off";
    return new metronome::service::Service(cfg);
  }();
  return *service;
}

[[noreturn]] void Broken(const char* what, const std::string& reply) {
  std::fprintf(stderr, "fuzz_http_routes: %s; reply (%zu bytes):\n", what, reply.size());
  std::fwrite(reply.data(), 1, reply.size(), stderr);
  std::fputc('\n', stderr);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view request(reinterpret_cast<const char*>(data), size);
  const std::string reply = TheService().Http().Serve(request);
  if (reply.empty()) return 0;  // nothing httplib could read as a request line
  if (reply.size() < 12 || reply.compare(0, 9, "HTTP/1.1 ") != 0) Broken("no status line", reply);
  const int status = std::atoi(reply.substr(9, 3).c_str());
  if (status < 100 || status > 599) Broken("no status", reply);
  if (status == 500) Broken("a route failed (500)", reply);
  const size_t end = reply.find("\r\n\r\n");
  if (end == std::string::npos) Broken("no end of headers", reply);
  const std::string_view headers(reply.data(), end);
  // Headers only, as HTTP has it for HEAD, also when the rest of the request line is garbage
  // (the server answers "HEAD\r\n" with a 400 that has no body).
  const bool head = request.substr(0, request.find_first_of(" \r\n")) == "HEAD";
  if (!head && headers.find("Content-Type: application/json") != std::string_view::npos) {
    const std::string_view body(reply.data() + end + 4, reply.size() - end - 4);
    if (nlohmann::json::parse(body, nullptr, false).is_discarded()) {
      Broken("a JSON reply is not JSON", reply);
    }
  }
  return 0;
}
