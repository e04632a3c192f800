// The fake API server (see fake_apiserver.hpp).
#include "fake_apiserver.hpp"

#include <algorithm>
#include <chrono>
#include <regex>
#include <stdexcept>

namespace metronome::kube::testing {

namespace {

Json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void Reply(httplib::Response& res, int code, const Json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void Fail(httplib::Response& res, int code, const std::string& reason, const std::string& msg) {
  Reply(res, code, StatusBody(code, reason, msg));
}

// Equality-based label selectors ("a=b,c==d,e!=f"), enough for the tests.
// Whether every term of a selector ("k=v", "k==v", "k!=v", comma-separated) holds, with
// `value_of` giving a key's value ("" when absent).
template <typename ValueOf>
bool SelectorHolds(const std::string& selector, const ValueOf& value_of) {
  size_t start = 0;
  while (!selector.empty() && start <= selector.size()) {
    size_t end = selector.find(',', start);
    if (end == std::string::npos) end = selector.size();
    const std::string term = selector.substr(start, end - start);
    const bool negate = term.find("!=") != std::string::npos;
    const size_t eq = term.find(negate ? "!=" : "=");
    if (eq != std::string::npos) {
      const std::string key = term.substr(0, eq);
      std::string value = term.substr(eq + (negate ? 2 : 1));
      if (!value.empty() && value[0] == '=') value.erase(0, 1);
      if ((value_of(key) == value) == negate) return false;
    }
    start = end + 1;
  }
  return true;
}

// labelSelector on metadata.labels and fieldSelector on dotted paths (spec.schedulerName, ...),
// as the API server filters lists and watches.
bool Matches(const Json& object, const std::string& label_selector,
             const std::string& field_selector) {
  const bool labels_hold = SelectorHolds(label_selector, [&](const std::string& key) {
    const Json* labels = object.contains("metadata") && object["metadata"].contains("labels")
                             ? &object["metadata"]["labels"]
                             : nullptr;
    return labels != nullptr && labels->contains(key) && (*labels)[key].is_string()
               ? (*labels)[key].get<std::string>()
               : std::string();
  });
  return labels_hold && SelectorHolds(field_selector, [&](const std::string& path) {
           const Json* at = &object;
           for (size_t from = 0; from <= path.size();) {
             size_t dot = path.find('.', from);
             if (dot == std::string::npos) dot = path.size();
             const std::string part = path.substr(from, dot - from);
             if (!at->is_object() || !at->contains(part)) return std::string();
             at = &(*at)[part];
             from = dot + 1;
           }
           return at->is_string() ? at->get<std::string>() : std::string();
         });
}

}  // namespace

FakeApiServer::FakeApiServer(std::string token) : token_(std::move(token)) {
  const auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res);
  };
  server_.Get(R"(/apis?/.*)", handler);
  server_.Post(R"(/apis?/.*)", handler);
  server_.Patch(R"(/apis?/.*)", handler);
  server_.Delete(R"(/apis?/.*)", handler);
  port_ = server_.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("fake API server: cannot bind");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

Json FakeApiServer::StoreLocked(const std::string& plural, const std::string& ns, Json object,
                                bool created) {
  ++rv_;
  Json& meta = object["metadata"];
  meta["resourceVersion"] = std::to_string(rv_);
  if (!ns.empty()) meta["namespace"] = ns;
  if (!meta.contains("uid")) meta["uid"] = "uid-" + std::to_string(rv_);
  if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = "2026-11-29T12:00:00Z";
  const std::string name = meta.value("name", "");
  objects_[{plural, ns, name}] = object;
  events_.push_back({rv_, created ? "ADDED" : "MODIFIED", plural, ns, object});
  cv_.notify_all();
  return object;
}

Json FakeApiServer::Put(const std::string& plural, const std::string& ns, Json object) {
  std::lock_guard lock(mu_);
  const std::string name = object["metadata"].value("name", "");
  const bool created = objects_.find({plural, ns, name}) == objects_.end();
  return StoreLocked(plural, ns, std::move(object), created);
}

void FakeApiServer::Remove(const std::string& plural, const std::string& ns,
                           const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = objects_.find({plural, ns, name});
  if (it == objects_.end()) return;
  Json last = it->second;
  objects_.erase(it);
  last["metadata"]["resourceVersion"] = std::to_string(++rv_);
  events_.push_back({rv_, "DELETED", plural, ns, last});
  cv_.notify_all();
}

void FakeApiServer::Compact() {
  {
    std::lock_guard lock(mu_);
    compacted_rv_ = rv_;
    events_.clear();
    ++watch_epoch_;
  }
  cv_.notify_all();
}

void FakeApiServer::PauseWatches(bool paused) {
  {
    std::lock_guard lock(mu_);
    paused_ = paused;
  }
  cv_.notify_all();
}

void FakeApiServer::FailNext(int count, int status) {
  std::lock_guard lock(mu_);
  fail_count_ = count;
  fail_status_ = status;
}

void FakeApiServer::CloseWatches() {
  {
    std::lock_guard lock(mu_);
    ++watch_epoch_;
  }
  cv_.notify_all();
}

std::optional<Json> FakeApiServer::Object(const std::string& plural, const std::string& ns,
                                          const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = objects_.find({plural, ns, name});
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

int64_t FakeApiServer::ResourceVersion() const {
  std::lock_guard lock(mu_);
  return rv_;
}

std::vector<std::string> FakeApiServer::Requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

int FakeApiServer::OpenWatches() const {
  std::lock_guard lock(mu_);
  return open_watches_;
}

void FakeApiServer::Handle(const httplib::Request& req, httplib::Response& res) {
  static const std::regex kPath(
      R"(^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?(/status)?$)");
  std::smatch m;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(req.method + " " + req.path + " " + req.get_header_value("Content-Type"));
    if (req.get_header_value("Authorization") != "Bearer " + token_) {
      return Fail(res, 401, "Unauthorized", "Unauthorized");
    }
    if (fail_count_ > 0) {
      --fail_count_;
      return Fail(res, fail_status_, fail_status_ == 429 ? "TooManyRequests" : "InternalError",
                  "injected failure");
    }
  }
  if (!std::regex_match(req.path, m, kPath)) return Fail(res, 404, "NotFound", "no such path");
  const std::string ns = m[1];
  const std::string plural = m[2];
  const std::string name = m[3];
  const bool status_path = m[4].matched;

  if (req.method == "GET" && name.empty()) {
    if (req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true") {
      return HandleWatch(req, res, plural, ns);
    }
    std::lock_guard lock(mu_);
    const std::string selector = req.get_param_value("labelSelector");
    const std::string fields = req.get_param_value("fieldSelector");
    std::vector<Json> items;
    for (const auto& [key, obj] : objects_) {
      if (std::get<0>(key) != plural || (!ns.empty() && std::get<1>(key) != ns)) continue;
      if (Matches(obj, selector, fields)) items.push_back(obj);
    }
    size_t offset = 0;
    if (req.has_param("continue")) {
      offset = std::stoul(req.get_param_value("continue"));
    }
    size_t limit = items.size();
    if (req.has_param("limit")) limit = std::stoul(req.get_param_value("limit"));
    Json list = {{"kind", "List"},
                 {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                 {"items", Json::array()}};
    for (size_t i = offset; i < items.size() && i < offset + limit; ++i) {
      list["items"].push_back(items[i]);
    }
    if (offset + limit < items.size()) {
      list["metadata"]["continue"] = std::to_string(offset + limit);
    }
    return Reply(res, 200, list);
  }

  std::lock_guard lock(mu_);
  const Key key{plural, ns, name};
  if (req.method == "GET") {
    const auto it = objects_.find(key);
    if (it == objects_.end()) {
      return Fail(res, 404, "NotFound", plural + " \"" + name + "\" not found");
    }
    Json obj = it->second;
    if (status_path) obj.erase("spec");
    return Reply(res, 200, obj);
  }
  if (req.method == "POST") {
    if (!name.empty()) return Fail(res, 405, "MethodNotAllowed", "POST to an object");
    Json obj = Json::parse(req.body, nullptr, false);
    if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].contains("name")) {
      return Fail(res, 400, "BadRequest", "the object has no metadata.name");
    }
    const std::string new_name = obj["metadata"]["name"].get<std::string>();
    if (objects_.count({plural, ns, new_name}) != 0) {
      return Fail(res, 409, "AlreadyExists", plural + " \"" + new_name + "\" already exists");
    }
    obj.erase("status");  // the status subresource ignores status on create
    obj["metadata"]["generation"] = 1;
    return Reply(res, 201, StoreLocked(plural, ns, std::move(obj), true));
  }
  if (req.method == "PATCH") {
    if (req.get_header_value("Content-Type") != "application/merge-patch+json") {
      return Fail(res, 415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format");
    }
    const auto it = objects_.find(key);
    if (it == objects_.end()) {
      return Fail(res, 404, "NotFound", plural + " \"" + name + "\" not found");
    }
    const Json patch = Json::parse(req.body, nullptr, false);
    if (!patch.is_object()) return Fail(res, 400, "BadRequest", "the patch is not a JSON object");
    const Json& current = it->second;
    if (patch.contains("metadata") && patch["metadata"].contains("resourceVersion") &&
        patch["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]) {
      return Fail(res, 409, "Conflict", "the object has been modified");
    }
    Json patched = current;
    patched.merge_patch(patch);
    Json result = current;
    if (status_path) {
      if (patched.contains("status")) result["status"] = patched["status"];
    } else {
      result = patched;
      if (current.contains("status")) {
        result["status"] = current["status"];
      } else {
        result.erase("status");
      }
      if (result.value("spec", Json()) != current.value("spec", Json())) {
        result["metadata"]["generation"] = current["metadata"].value("generation", 1) + 1;
      }
    }
    return Reply(res, 200, StoreLocked(plural, ns, std::move(result), false));
  }
  if (req.method == "DELETE") {
    const auto it = objects_.find(key);
    if (it == objects_.end()) {
      return Fail(res, 404, "NotFound", plural + " \"" + name + "\" not found");
    }
    Json last = it->second;
    objects_.erase(it);
    last["metadata"]["resourceVersion"] = std::to_string(++rv_);
    events_.push_back({rv_, "DELETED", plural, ns, last});
    cv_.notify_all();
    return Reply(res, 200, last);
  }
  Fail(res, 405, "MethodNotAllowed", req.method);
}

void FakeApiServer::HandleWatch(const httplib::Request& req, httplib::Response& res,
                                const std::string& plural, const std::string& ns) {
  int64_t from = 0;
  {
    std::lock_guard lock(mu_);
    from = req.has_param("resourceVersion") && !req.get_param_value("resourceVersion").empty()
               ? std::stoll(req.get_param_value("resourceVersion"))
               : rv_;
    if (from < compacted_rv_) {
      // The real API server answers 200 and one ERROR event with a 410 Status.
      const Json ev = {{"type", "ERROR"},
                       {"object", StatusBody(410, "Expired",
                                             "too old resource version: " + std::to_string(from) +
                                                 " (" + std::to_string(compacted_rv_) + ")")}};
      res.status = 200;
      res.set_content(ev.dump() + "\n", "application/json");
      return;
    }
  }
  const int64_t timeout_s =
      req.has_param("timeoutSeconds") ? std::stoll(req.get_param_value("timeoutSeconds")) : 60;
  const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  const std::string selector = req.get_param_value("labelSelector");
  const std::string fields = req.get_param_value("fieldSelector");
  struct State {
    int64_t cursor = 0;
    std::chrono::steady_clock::time_point deadline;
    uint64_t epoch = 0;
    bool counted = false;
  };
  auto state = std::make_shared<State>();
  state->cursor = from;
  state->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  {
    std::lock_guard lock(mu_);
    state->epoch = watch_epoch_;
  }
  res.status = 200;
  res.set_chunked_content_provider(
      "application/json",
      [this, state, plural, ns, selector, fields, bookmarks](size_t, httplib::DataSink& sink) {
        std::unique_lock lock(mu_);
        if (!state->counted) {
          state->counted = true;
          ++open_watches_;
        }
        const auto pending = [&] {
          for (const Event& e : events_) {
            if (e.rv > state->cursor && e.plural == plural && (ns.empty() || e.ns == ns)) {
              return true;
            }
          }
          return false;
        };
        cv_.wait_until(lock, state->deadline, [&] {
          return stopping_ || watch_epoch_ != state->epoch || (!paused_ && pending());
        });
        std::string out;
        for (const Event& e : events_) {
          if (paused_) break;
          if (e.rv <= state->cursor) continue;
          state->cursor = e.rv;
          if (e.plural != plural || (!ns.empty() && e.ns != ns)) continue;
          if (!Matches(e.object, selector, fields)) continue;
          out += Json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
        }
        const bool end = stopping_ || watch_epoch_ != state->epoch ||
                         std::chrono::steady_clock::now() >= state->deadline;
        if (end && bookmarks && !stopping_) {
          out += Json{{"type", "BOOKMARK"},
                      {"object",
                       {{"kind", "Bookmark"},
                        {"metadata", {{"resourceVersion", std::to_string(state->cursor)}}}}}}
                     .dump() +
                 "\n";
        }
        lock.unlock();
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (end) sink.done();
        return true;
      },
      [this, state](bool) {
        std::lock_guard lock(mu_);
        if (state->counted) --open_watches_;
      });
}

ClientConfig ClientConfigFor(const FakeApiServer& api) {
  using namespace std::chrono_literals;
  ClientConfig c;
  c.server = api.Url();
  c.token = api.Token();
  c.connect_timeout = 500ms;
  c.request_timeout = 2s;
  c.backoff_initial = 5ms;
  c.backoff_max = 20ms;
  c.max_attempts = 3;
  return c;
}

}  // namespace metronome::kube::testing
