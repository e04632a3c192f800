// A small fake Kubernetes API server for tests: a cpp-httplib server on loopback that speaks the
// conventions metronome::kube relies on, as documented for the real one:
//   - paths /api/v1/... and /apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>[/status]];
//   - a bearer token (401 Status otherwise);
//   - labelSelector and fieldSelector (dotted paths, = == !=) on lists and watches;
//   - one resourceVersion counter for everything, incremented by every write; lists carry it in
//     metadata.resourceVersion and page with limit/continue;
//   - GET ?watch=1&resourceVersion=N streams the events after N as newline-delimited JSON in a
//     chunked response, ends after timeoutSeconds (with a BOOKMARK), and answers a version older
//     than the compaction point with an ERROR event carrying a 410 "Expired" Status;
//   - POST creates (409 AlreadyExists), drops status (status subresource);
//   - PATCH needs application/merge-patch+json (415 otherwise), applies RFC 7386; on /status only
//     the status changes, on the object everything but the status; a stale
//     metadata.resourceVersion in the patch is a 409 Conflict;
//   - DELETE; and injected failures (the next N requests answer a given status).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "metronome/kube/config.hpp"

namespace metronome::kube::testing {

using Json = nlohmann::json;

class FakeApiServer {
 public:
  explicit FakeApiServer(std::string token = "test-token");
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int Port() const { return port_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& Token() const { return token_; }

  // What a controller would do: create or replace an object (ADDED or MODIFIED), delete one.
  // `plural` e.g. "nodes", "trafficprofiles"; `ns` empty for cluster-scoped objects.
  Json Put(const std::string& plural, const std::string& ns, Json object);
  void Remove(const std::string& plural, const std::string& ns, const std::string& name);
  // Forgets all events so far (etcd compaction) and ends the open watch streams: a watch from an
  // older resourceVersion gets 410 Gone.
  void Compact();
  // While paused, open watches deliver nothing (changes pile up as on a slow connection).
  void PauseWatches(bool paused);
  // The next `count` requests answer `status` with a Status body.
  void FailNext(int count, int status);
  // Ends every open watch stream now (as an API server restart would).
  void CloseWatches();

  std::optional<Json> Object(const std::string& plural, const std::string& ns,
                             const std::string& name) const;
  int64_t ResourceVersion() const;
  // "METHOD path content-type" of every request, in order.
  std::vector<std::string> Requests() const;
  int OpenWatches() const;

 private:
  struct Event {
    int64_t rv;
    std::string type;
    std::string plural;
    std::string ns;
    Json object;
  };
  using Key = std::tuple<std::string, std::string, std::string>;  // plural, ns, name

  void Handle(const httplib::Request& req, httplib::Response& res);
  void HandleWatch(const httplib::Request& req, httplib::Response& res, const std::string& plural,
                   const std::string& ns);
  Json StoreLocked(const std::string& plural, const std::string& ns, Json object, bool created);

  std::string token_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Json> objects_;
  std::vector<Event> events_;
  int64_t rv_ = 100;
  int64_t compacted_rv_ = 0;
  int fail_count_ = 0;
  int fail_status_ = 500;
  uint64_t watch_epoch_ = 0;  // bumped by CloseWatches
  int open_watches_ = 0;
  bool stopping_ = false;
  bool paused_ = false;
  std::vector<std::string> requests_;
};

// A client configuration for `api`: its URL and token, short timeouts and quick retries.
ClientConfig ClientConfigFor(const FakeApiServer& api);

}  // namespace metronome::kube::testing
