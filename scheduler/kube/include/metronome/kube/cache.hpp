// A local copy of one resource's objects, kept current by ListWatch on a background thread (what
// client-go calls an informer's store). The scheduler keeps one for Nodes (rack and GPU labels
// for the extender) and one for TrafficProfiles (declared job profiles).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "metronome/kube/client.hpp"

namespace metronome::kube {

class Cache {
 public:
  // `on_change` runs on the cache's thread after every list and every event (keep it short:
  // e.g. hand Objects() to Extender::UpdateNodeLabels).
  Cache(Client& client, Resource resource, std::string ns = "", ListOptions options = {},
        std::function<void()> on_change = nullptr);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  void Start();
  void Stop();

  // Objects by "namespace/name" (cluster-scoped: "name").
  std::map<std::string, Json> Objects() const;
  bool Synced() const { return synced_.load(); }    // a first list arrived
  uint64_t Lists() const { return lists_.load(); }  // relists (1 + one per 410 or failure)
  uint64_t Errors() const { return errors_.load(); }
  Error LastError() const;

  // An object's key in Objects(); "" for one that has none (no string name, or a namespace that
  // is no string): such objects are left out.
  static std::string KeyOf(const Json& object);

 private:
  Client& client_;
  Resource resource_;
  std::string ns_;
  ListOptions options_;
  std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::map<std::string, Json> objects_;
  Error last_error_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> lists_{0};
  std::atomic<uint64_t> errors_{0};
  std::thread thread_;
};

// Node labels by node name, from a Cache of Nodes (the shape Extender::UpdateNodeLabels takes).
std::map<std::string, std::map<std::string, std::string>> NodeLabelsOf(const Cache& nodes);

}  // namespace metronome::kube
