// A small Kubernetes REST client over cpp-httplib: get, list, watch, create, merge-patch and
// status merge-patch of any resource, as JSON (nlohmann::json). It follows the API server's
// conventions: lists carry metadata.resourceVersion; a watch started from that version streams
// newline-delimited events (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR), and an ERROR event with
// code 410 (or an HTTP 410) means the version is too old and the caller must relist.
//
// Every request has bounded timeouts; transient failures (no answer, 429, 5xx) are retried with
// exponential backoff and jitter up to ClientConfig::max_attempts. Errors are returned, never
// thrown. A Client may be used from several threads: unary requests share one connection under
// a lock, each watch opens its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "metronome/kube/config.hpp"
#include "metronome/kube/result.hpp"

namespace metronome::kube {

using Json = nlohmann::json;

// A resource type: core ("" group, /api/v1) or from an API group (/apis/<group>/<version>).
struct Resource {
  std::string group;    // "" for core
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "nodes", "trafficprofiles"
  bool namespaced = true;

  // The collection path; `ns` is ignored for cluster-scoped resources and may be empty for a
  // namespaced one (all namespaces, list/watch only).
  std::string CollectionPath(const std::string& ns) const;
  std::string ObjectPath(const std::string& ns, const std::string& name) const;
};

// The resources Metronome uses.
namespace resources {
Resource Nodes();
Resource Pods();
Resource TrafficProfiles();  // metronome.dev/v1alpha1, namespaced
Resource LinkSchedules();    // metronome.dev/v1alpha1, cluster-scoped
Resource Leases();           // coordination.k8s.io/v1, namespaced (leader election)
}  // namespace resources

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // "" = most recent (a quorum read)
  int64_t limit = 500;           // page size; List follows `continue` until the end
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version (from a list)
  bool allow_bookmarks = true;
  int64_t timeout_seconds = 0;  // 0: ClientConfig::watch_timeout
};

// Json's noexcept default constructor reaches a throw for an impossible case (json.hpp carries
// the same NOLINT).
// NOLINTNEXTLINE(bugprone-exception-escape)
struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  Json object;       // the object (for ERROR: a Status)
};

// How a watch ended without an error: the server closed the stream (its timeout) or `stop`
// was set. `resource_version` is the last version seen: watch again from it.
struct WatchEnd {
  std::string resource_version;
  uint64_t events = 0;
  bool stopped = false;
};

class Client {
 public:
  explicit Client(ClientConfig config);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientConfig& Config() const { return config_; }

  Result<Json> Get(const Resource& r, const std::string& ns, const std::string& name);
  // All pages merged into one list object ({"items": [...], "metadata": {"resourceVersion"}}).
  Result<Json> List(const Resource& r, const std::string& ns, const ListOptions& options = {});
  Result<Json> Create(const Resource& r, const std::string& ns, const Json& object);
  // application/merge-patch+json (RFC 7386) on the object, or on its status subresource.
  Result<Json> MergePatch(const Resource& r, const std::string& ns, const std::string& name,
                          const Json& patch);
  Result<Json> MergePatchStatus(const Resource& r, const std::string& ns, const std::string& name,
                                const Json& patch);
  Status Delete(const Resource& r, const std::string& ns, const std::string& name);

  // Streams events to `on_event` until the server ends the stream, `on_event` returns false, or
  // `stop` becomes true (checked at least every read timeout). An ERROR event is returned as an
  // Error (410 Gone for an expired resourceVersion) and not passed to `on_event`. Not retried:
  // the caller decides (ListWatch below does it).
  Result<WatchEnd> Watch(const Resource& r, const std::string& ns, const WatchOptions& options,
                         const std::function<bool(const WatchEvent&)>& on_event,
                         const std::atomic<bool>* stop = nullptr);

  // Requests made and transient failures retried, for metrics.
  uint64_t Requests() const { return requests_.load(); }
  uint64_t Retries() const { return retries_.load(); }

 private:
  struct Impl;
  Result<Json> Do(const std::string& method, const std::string& path, const std::string& body,
                  const std::string& content_type);
  std::string Token();

  ClientConfig config_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> retries_{0};
};

// List-then-watch loop (what client-go calls a reflector): lists, hands the whole list to
// `on_list` (replace your cache), then watches from the list's resourceVersion and hands each
// event to `on_event`; when the watch ends it watches again from the last version; on 410 Gone
// it relists; on other errors it backs off (bounded) and relists. Returns when `stop` is set.
struct ListWatchHandlers {
  std::function<void(const Json& list)> on_list;
  std::function<void(const WatchEvent& event)> on_event;
  std::function<void(const Error& error)> on_error;  // optional: each failure, for logs/metrics
};
void ListWatch(Client& client, const Resource& r, const std::string& ns,
               const ListOptions& list_options, const ListWatchHandlers& handlers,
               const std::atomic<bool>& stop);

}  // namespace metronome::kube
