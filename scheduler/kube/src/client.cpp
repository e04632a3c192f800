// The Kubernetes REST client (see client.hpp).
#include "metronome/kube/client.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace metronome::kube {

namespace {

using Clock = std::chrono::steady_clock;

std::string Encode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

void AddParam(std::string& query, const std::string& key, const std::string& value) {
  if (value.empty()) return;
  query += query.empty() ? '?' : '&';
  query += key + "=" + Encode(value);
}

// The API server answers errors with a Status object; anything else is wrapped as it came.
Error ErrorFromResponse(int status, const std::string& body, const std::string& what) {
  Error e{status, "", what};
  const Json j = Json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("reason") && j["reason"].is_string()) e.reason = j["reason"].get<std::string>();
    if (j.contains("message") && j["message"].is_string()) {
      e.message = what + ": " + j["message"].get<std::string>();
    }
  } else if (!body.empty()) {
    e.message = what + ": " + body.substr(0, 200);
  }
  if (e.reason.empty()) {
    switch (status) {
      case 400:
        e.reason = "BadRequest";
        break;
      case 401:
        e.reason = "Unauthorized";
        break;
      case 403:
        e.reason = "Forbidden";
        break;
      case 404:
        e.reason = "NotFound";
        break;
      case 409:
        e.reason = "Conflict";
        break;
      case 410:
        e.reason = "Expired";
        break;
      case 415:
        e.reason = "UnsupportedMediaType";
        break;
      case 422:
        e.reason = "Invalid";
        break;
      case 429:
        e.reason = "TooManyRequests";
        break;
      default:
        e.reason = status >= 500 ? "InternalError" : "Unknown";
        break;
    }
  }
  return e;
}

std::unique_ptr<httplib::Client> MakeHttp(const ClientConfig& c,
                                          std::chrono::milliseconds read_timeout) {
  auto cli = std::make_unique<httplib::Client>(c.server);
  cli->set_connection_timeout(c.connect_timeout);
  cli->set_read_timeout(read_timeout);
  cli->set_write_timeout(c.request_timeout);
  cli->set_keep_alive(true);
  if (c.server.rfind("https://", 0) == 0) {
    if (!c.ca_file.empty()) cli->set_ca_cert_path(c.ca_file);
    cli->enable_server_certificate_verification(c.verify_tls);
  }
  return cli;
}

}  // namespace

std::string Resource::CollectionPath(const std::string& ns) const {
  std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) p += "/namespaces/" + ns;
  return p + "/" + plural;
}

std::string Resource::ObjectPath(const std::string& ns, const std::string& name) const {
  return CollectionPath(ns) + "/" + name;
}

namespace resources {
Resource Nodes() {
  return {"", "v1", "nodes", false};
}
Resource Pods() {
  return {"", "v1", "pods", true};
}
Resource TrafficProfiles() {
  return {"metronome.dev", "v1alpha1", "trafficprofiles", true};
}
Resource LinkSchedules() {
  return {"metronome.dev", "v1alpha1", "linkschedules", false};
}
Resource Leases() {
  return {"coordination.k8s.io", "v1", "leases", true};
}
}  // namespace resources

struct Client::Impl {
  std::mutex mu;  // guards http and the token cache
  std::unique_ptr<httplib::Client> http;
  std::string token;
  Clock::time_point token_read{};
  bool token_stale = true;  // read the token file at the next request
  std::mt19937 rng{std::random_device{}()};
};

Client::Client(ClientConfig config) : config_(std::move(config)), impl_(std::make_unique<Impl>()) {
  impl_->token = config_.token;
}

Client::~Client() = default;

std::string Client::Token() {
  // Called with impl_->mu held.
  if (!config_.token_file.empty() &&
      (impl_->token_stale || Clock::now() - impl_->token_read >= config_.token_refresh)) {
    if (auto t = ReadFile(config_.token_file); t && !Trim(*t).empty()) {
      impl_->token = Trim(*t);
    } else {
      spdlog::warn("kube: cannot re-read the service-account token {}; keeping the old one",
                   config_.token_file);
    }
    impl_->token_read = Clock::now();
    impl_->token_stale = false;
  }
  return impl_->token;
}

Result<Json> Client::Do(const std::string& method, const std::string& path, const std::string& body,
                        const std::string& content_type) {
  const std::string what = method + " " + path;
  auto backoff = config_.backoff_initial;
  const int attempts = std::max(1, config_.max_attempts);
  Error last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    std::chrono::milliseconds wait = backoff;
    {
      std::lock_guard lock(impl_->mu);
      if (!impl_->http) impl_->http = MakeHttp(config_, config_.request_timeout);
      if (!impl_->http->is_valid()) {
        return Error{0, "ConfigError", "cannot make a client for server '" + config_.server + "'"};
      }
      httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", config_.user_agent}};
      if (const std::string token = Token(); !token.empty()) {
        headers.emplace("Authorization", "Bearer " + token);
      }
      ++requests_;
      const auto send = [&]() -> httplib::Result {
        if (method == "GET") return impl_->http->Get(path, headers);
        if (method == "POST") return impl_->http->Post(path, headers, body, content_type);
        if (method == "PATCH") return impl_->http->Patch(path, headers, body, content_type);
        return impl_->http->Delete(path, headers);
      };
      if (method != "GET" && method != "POST" && method != "PATCH" && method != "DELETE") {
        return Error{0, "BadRequest", "unsupported method " + method};
      }
      httplib::Result res = send();
      if (!res) {
        last = Error{0, "Transport", what + ": " + httplib::to_string(res.error())};
        impl_->http.reset();  // a fresh connection next time
      } else if (res->status >= 200 && res->status < 300) {
        if (res->body.empty()) return Json::object();
        Json j = Json::parse(res->body, nullptr, false);
        if (j.is_discarded()) {
          return Error{res->status, "BadResponse", what + ": the answer is not JSON"};
        }
        return j;
      } else {
        last = ErrorFromResponse(res->status, res->body, what);
        if (res->status == 401 && !config_.token_file.empty() && attempt == 1) {
          impl_->token_stale = true;  // re-read a rotated token and try once more
          continue;
        }
        if (res->status == 429 && res->has_header("Retry-After")) {
          const long secs = std::strtol(res->get_header_value("Retry-After").c_str(), nullptr, 10);
          if (secs > 0) wait = std::chrono::milliseconds(secs * 1000);
        }
      }
    }
    if (!last.Transient() || attempt == attempts) break;
    ++retries_;
    std::chrono::milliseconds jittered;
    {
      std::lock_guard lock(impl_->mu);
      std::uniform_real_distribution<double> jitter(0.5, 1.0);
      jittered = std::chrono::milliseconds(
          static_cast<int64_t>(static_cast<double>(wait.count()) * jitter(impl_->rng)));
    }
    jittered = std::min(jittered, config_.backoff_max);
    spdlog::debug("kube: {} (attempt {}/{}), retrying in {} ms", last.ToString(), attempt, attempts,
                  jittered.count());
    std::this_thread::sleep_for(jittered);
    backoff = std::min(backoff * 2, config_.backoff_max);
  }
  return last;
}

Result<Json> Client::Get(const Resource& r, const std::string& ns, const std::string& name) {
  return Do("GET", r.ObjectPath(ns, name), "", "");
}

Result<Json> Client::List(const Resource& r, const std::string& ns, const ListOptions& options) {
  Json merged;
  std::string cont;
  do {
    std::string query;
    AddParam(query, "labelSelector", options.label_selector);
    AddParam(query, "fieldSelector", options.field_selector);
    if (options.limit > 0) AddParam(query, "limit", std::to_string(options.limit));
    if (cont.empty()) {
      AddParam(query, "resourceVersion", options.resource_version);
    } else {
      AddParam(query, "continue", cont);
    }
    auto page = Do("GET", r.CollectionPath(ns) + query, "", "");
    if (!page) return page.GetError();
    Json& p = *page;
    if (!p.is_object() || !p.contains("items") ||
        !(p["items"].is_array() || p["items"].is_null())) {
      return Error{200, "BadResponse", "GET " + r.CollectionPath(ns) + ": not a list"};
    }
    if (merged.is_null()) {
      merged = p;
      if (merged["items"].is_null()) merged["items"] = Json::array();
    } else if (p["items"].is_array()) {
      for (auto& item : p["items"]) merged["items"].push_back(std::move(item));
    }
    cont.clear();
    if (p.contains("metadata") && p["metadata"].is_object() && p["metadata"].contains("continue") &&
        p["metadata"]["continue"].is_string()) {
      cont = p["metadata"]["continue"].get<std::string>();
    }
  } while (!cont.empty());
  if (merged.contains("metadata") && merged["metadata"].is_object()) {
    merged["metadata"].erase("continue");
  }
  return merged;
}

Result<Json> Client::Create(const Resource& r, const std::string& ns, const Json& object) {
  return Do("POST", r.CollectionPath(ns), object.dump(), "application/json");
}

Result<Json> Client::MergePatch(const Resource& r, const std::string& ns, const std::string& name,
                                const Json& patch) {
  return Do("PATCH", r.ObjectPath(ns, name), patch.dump(), "application/merge-patch+json");
}

Result<Json> Client::MergePatchStatus(const Resource& r, const std::string& ns,
                                      const std::string& name, const Json& patch) {
  return Do("PATCH", r.ObjectPath(ns, name) + "/status", patch.dump(),
            "application/merge-patch+json");
}

Status Client::Delete(const Resource& r, const std::string& ns, const std::string& name) {
  auto res = Do("DELETE", r.ObjectPath(ns, name), "", "");
  if (!res) return res.GetError();
  return Ok{};
}

Result<WatchEnd> Client::Watch(const Resource& r, const std::string& ns,
                               const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& on_event,
                               const std::atomic<bool>* stop) {
  const int64_t timeout_s =
      options.timeout_seconds > 0 ? options.timeout_seconds : config_.watch_timeout.count();
  std::string query = "?watch=1";
  AddParam(query, "resourceVersion", options.resource_version);
  if (options.allow_bookmarks) query += "&allowWatchBookmarks=true";
  AddParam(query, "timeoutSeconds", std::to_string(timeout_s));
  AddParam(query, "labelSelector", options.label_selector);
  AddParam(query, "fieldSelector", options.field_selector);
  const std::string path = r.CollectionPath(ns) + query;

  // Its own connection; the read timeout covers the server's own timeout plus a margin, and a
  // helper thread closes the socket when `stop` is set.
  auto http = MakeHttp(config_, std::chrono::seconds(timeout_s + 30));
  if (!http->is_valid()) {
    return Error{0, "ConfigError", "cannot make a client for server '" + config_.server + "'"};
  }
  httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", config_.user_agent}};
  {
    std::lock_guard lock(impl_->mu);
    if (const std::string token = Token(); !token.empty()) {
      headers.emplace("Authorization", "Bearer " + token);
    }
  }
  ++requests_;

  WatchEnd end;
  end.resource_version = options.resource_version;
  std::optional<Error> failure;
  int status = 0;
  std::string buffer;
  std::string error_body;
  std::atomic<bool> cancelled{false};

  const auto handle_line = [&](const std::string& line) -> bool {
    if (Trim(line).empty()) return true;
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      failure = Error{200, "BadResponse", "GET " + path + ": a watch event is not JSON"};
      return false;
    }
    WatchEvent ev;
    ev.type = j["type"].get<std::string>();
    if (j.contains("object")) ev.object = std::move(j["object"]);
    if (ev.type == "ERROR") {
      int code = 500;
      if (ev.object.is_object() && ev.object.contains("code") && ev.object["code"].is_number()) {
        code = ev.object["code"].get<int>();
      }
      failure = ErrorFromResponse(code, ev.object.dump(), "watch " + r.CollectionPath(ns));
      return false;
    }
    if (ev.object.is_object() && ev.object.contains("metadata") &&
        ev.object["metadata"].is_object() && ev.object["metadata"].contains("resourceVersion") &&
        ev.object["metadata"]["resourceVersion"].is_string()) {
      end.resource_version = ev.object["metadata"]["resourceVersion"].get<std::string>();
    }
    ++end.events;
    if (!on_event(ev)) {
      cancelled = true;
      return false;
    }
    return true;
  };

  std::atomic<bool> done{false};
  std::thread stopper;
  if (stop != nullptr) {
    // Closes the connection until the request returns: a close before the request has opened
    // it closes nothing, and the watch would then run to the server's timeout.
    stopper = std::thread([&] {
      while (!done.load()) {
        if (stop->load()) {
          cancelled = true;
          http->stop();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }

  auto res = http->Get(
      path, headers,
      [&](const httplib::Response& response) {
        status = response.status;
        return true;
      },
      [&](const char* data, size_t len) {
        if (status != 200) {
          error_body.append(data, len);
          return error_body.size() < 65536;
        }
        buffer.append(data, len);
        size_t pos = 0;
        for (size_t nl; (nl = buffer.find('\n', pos)) != std::string::npos; pos = nl + 1) {
          if (!handle_line(buffer.substr(pos, nl - pos))) {
            buffer.erase(0, nl + 1);
            return false;
          }
        }
        buffer.erase(0, pos);
        return !(stop != nullptr && stop->load());
      });
  done = true;
  if (stopper.joinable()) stopper.join();

  if (failure) return *failure;
  if (status != 0 && status != 200) {
    return ErrorFromResponse(status, error_body, "watch " + r.CollectionPath(ns));
  }
  if (cancelled || (stop != nullptr && stop->load())) {
    end.stopped = true;
    return end;
  }
  if (!res) {
    return Error{0, "Transport", "watch " + path + ": " + httplib::to_string(res.error())};
  }
  if (!buffer.empty() && !handle_line(buffer)) {
    if (failure) return *failure;
    end.stopped = cancelled;
  }
  return end;
}

void ListWatch(Client& client, const Resource& r, const std::string& ns,
               const ListOptions& list_options, const ListWatchHandlers& handlers,
               const std::atomic<bool>& stop) {
  const ClientConfig& cfg = client.Config();
  auto backoff = cfg.backoff_initial;
  const auto pause = [&](std::chrono::milliseconds d) {
    const auto until = Clock::now() + d;
    while (!stop.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  const auto report = [&](const Error& e) {
    if (handlers.on_error) handlers.on_error(e);
  };
  while (!stop.load()) {
    auto list = client.List(r, ns, list_options);
    if (!list) {
      report(list.GetError());
      pause(backoff);
      backoff = std::min(backoff * 2, cfg.backoff_max);
      continue;
    }
    std::string rv;
    if (list->contains("metadata") && (*list)["metadata"].is_object() &&
        (*list)["metadata"].contains("resourceVersion") &&
        (*list)["metadata"]["resourceVersion"].is_string()) {
      rv = (*list)["metadata"]["resourceVersion"].get<std::string>();
    }
    if (handlers.on_list) handlers.on_list(*list);
    // Watch from the list's version until the watch fails.
    while (!stop.load()) {
      WatchOptions w;
      w.label_selector = list_options.label_selector;
      w.field_selector = list_options.field_selector;
      w.resource_version = rv;
      auto end = client.Watch(
          r, ns, w,
          [&](const WatchEvent& ev) {
            if (handlers.on_event) handlers.on_event(ev);
            return true;
          },
          &stop);
      if (!end) {
        report(end.GetError());
        if (!end.GetError().Gone()) {
          pause(backoff);
          backoff = std::min(backoff * 2, cfg.backoff_max);
        }
        break;  // relist
      }
      backoff = cfg.backoff_initial;
      rv = end->resource_version;
      if (end->stopped) return;
    }
  }
}

}  // namespace metronome::kube
