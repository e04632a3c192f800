// The object cache (see cache.hpp).
#include "metronome/kube/cache.hpp"

#include <spdlog/spdlog.h>

#include "metronome/kube/resources.hpp"

namespace metronome::kube {

Cache::Cache(Client& client, Resource resource, std::string ns, ListOptions options,
             std::function<void()> on_change)
    : client_(client),
      resource_(std::move(resource)),
      ns_(std::move(ns)),
      options_(std::move(options)),
      on_change_(std::move(on_change)) {}

Cache::~Cache() {
  Stop();
}

std::string Cache::KeyOf(const Json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return {};
  }
  const Json& meta = object["metadata"];
  // An object whose name or namespace is no string has no key (a broken server or proxy): left
  // out, not a throw on the watch thread.
  const auto text = [&](const char* key) {
    const auto it = meta.find(key);
    return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (meta.contains("namespace") && !meta["namespace"].is_string()) return {};
  const std::string name = text("name");
  const std::string ns = text("namespace");
  if (name.empty()) return {};
  return ns.empty() ? name : ns + "/" + name;
}

void Cache::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    ListWatchHandlers h;
    h.on_list = [this](const Json& list) {
      {
        std::lock_guard lock(mu_);
        objects_.clear();
        for (const Json& item : list["items"]) {
          if (std::string key = KeyOf(item); !key.empty()) objects_[key] = item;
        }
      }
      ++lists_;
      synced_ = true;
      if (on_change_) on_change_();
    };
    h.on_event = [this](const WatchEvent& ev) {
      const std::string key = KeyOf(ev.object);
      if (key.empty()) return;  // BOOKMARK and the like
      {
        std::lock_guard lock(mu_);
        if (ev.type == "DELETED") {
          objects_.erase(key);
        } else if (ev.type == "ADDED" || ev.type == "MODIFIED") {
          objects_[key] = ev.object;
        } else {
          return;
        }
      }
      if (on_change_) on_change_();
    };
    h.on_error = [this](const Error& e) {
      ++errors_;
      {
        std::lock_guard lock(mu_);
        last_error_ = e;
      }
      if (e.Gone()) {
        spdlog::debug("kube: {} watch expired, relisting", resource_.plural);
      } else {
        spdlog::warn("kube: {}: {}", resource_.plural, e.ToString());
      }
    };
    ListWatch(client_, resource_, ns_, options_, h, stop_);
  });
}

void Cache::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, Json> Cache::Objects() const {
  std::lock_guard lock(mu_);
  return objects_;
}

Error Cache::LastError() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

std::map<std::string, std::map<std::string, std::string>> NodeLabelsOf(const Cache& nodes) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const auto& [key, object] : nodes.Objects()) {
    NodeInfo n = ParseNode(object);
    if (!n.name.empty()) out[n.name] = std::move(n.labels);
  }
  return out;
}

}  // namespace metronome::kube
