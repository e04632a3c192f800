#include "metronome/service/config.hpp"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <string_view>

#include "yaml_util.hpp"

namespace metronome::service {

using yaml_util::Child;
using yaml_util::ReadDouble;
using yaml_util::ReadInt;
using yaml_util::ReadString;

namespace {

// Reads a map node key by key; each known key has a reader, anything else is rejected.
using Readers = std::map<std::string, std::function<void(const YAML::Node&, const std::string&)>>;

void ReadMap(const YAML::Node& node, const std::string& key, const Readers& readers) {
  if (!node.IsMap()) throw ConfigError(key.empty() ? "(document)" : key, "must be a mapping");
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>("");
    const auto it = readers.find(name);
    const std::string path = Child(key, name);
    if (it == readers.end()) throw ConfigError(path, "unknown key");
    if (kv.second.IsNull()) continue;  // `key:` with no value keeps the default
    it->second(kv.second, path);
  }
}

template <typename T>
auto Int(T& out, int64_t lo, int64_t hi) {
  return [&out, lo, hi](const YAML::Node& n, const std::string& key) {
    out = static_cast<T>(ReadInt(n, key, lo, hi));
  };
}

auto Dbl(double& out, double lo, double hi) {
  return [&out, lo, hi](const YAML::Node& n, const std::string& key) {
    out = ReadDouble(n, key, lo, hi);
  };
}

auto Str(std::string& out) {
  return [&out](const YAML::Node& n, const std::string& key) { out = ReadString(n, key); };
}

auto Bool(bool& out) {
  return [&out](const YAML::Node& n, const std::string& key) {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
      throw ConfigError(key,
                        "must be true or false, got '" + (n.IsScalar() ? n.Scalar() : "?") + "'");
    }
    out = v;
  };
}

// Constant-initialized: a static std::set could throw before main (cert-err58-cpp).
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

}  // namespace

std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b != 0x7f) {
      out.push_back(c);
      continue;
    }
    out += "\\x";
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

void LoadConfigYaml(const std::string& yaml_text, ServiceConfig& cfg) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("(document)", std::string("is not valid YAML: ") + e.what());
  }
  if (doc.IsNull()) return;  // an empty file keeps every default
  bool inline_topology = false;
  Readers top = {
      {"listen", Str(cfg.listen)},
      {"http",
       [&](const YAML::Node& n, const std::string& key) {
         if (n.IsScalar()) {
           cfg.http = ReadString(n, key);
           return;
         }
         ReadMap(n, key,
                 {{"address", Str(cfg.http)},
                  {"tls_cert_file", Str(cfg.http_tls.cert_file)},
                  {"tls_key_file", Str(cfg.http_tls.key_file)},
                  {"tls_client_ca_file", Str(cfg.http_tls.client_ca_file)},
                  {"rate_limit", Dbl(cfg.http_rate_limit, 0.0, 1e6)}});
       }},
      {"log_level", Str(cfg.log_level)},
      {"topology",
       [&](const YAML::Node& n, const std::string& key) {
         if (n.IsScalar()) {
           cfg.topology_file = ReadString(n, key);
           return;
         }
         cfg.topology = ParseTopologyYaml(YAML::Dump(n), key);
         inline_topology = true;
       }},
      {"curve",
       [&](const YAML::Node& n, const std::string& key) {
         ReadMap(n, key,
                 {{"secret_key_file", Str(cfg.curve.secret_key_file)},
                  {"public_key_file", Str(cfg.curve.public_key_file)}});
       }},
      {"registry",
       [&](const YAML::Node& n, const std::string& key) {
         auto& r = cfg.registry;
         ReadMap(n, key,
                 {{"rank_timeout_ms", Int(r.rank_timeout_ms, 100, 86'400'000)},
                  {"report_interval_ms", Int(r.report_interval_ms, 10, 600'000)},
                  {"max_clients", Int(r.max_clients, 1, 10'000'000)},
                  {"max_ranks_per_client", Int(r.max_ranks_per_client, 1, 1'000'000)}});
       }},
      {"planning",
       [&](const YAML::Node& n, const std::string& key) {
         auto& p = cfg.planning;
         ReadMap(n, key,
                 {{"min_confidence", Dbl(p.min_confidence, 0.0, 1.0)},
                  {"saturate_fraction", Dbl(p.saturate_fraction, 0.01, 1.0)},
                  {"wire_margin", Dbl(p.wire_margin, 0.0, 1.0)},
                  {"period_margin", Dbl(p.period_margin, 0.0, 0.5)},
                  {"epoch_ns", Int(p.epoch_ns, -(int64_t{1} << 61), int64_t{1} << 61)},
                  {"max_stretch", Dbl(p.max_stretch, 1.0, 1000.0)},
                  {"min_cushion_us", Int(p.min_cushion_us, 0, 10'000'000)},
                  {"jitter_cushion", Dbl(p.jitter_cushion, 0.0, 100.0)},
                  {"cushion", Bool(p.cushion)}});
       }},
      {"timetable",
       [&](const YAML::Node& n, const std::string& key) {
         auto& t = cfg.timetable;
         ReadMap(n, key,
                 {{"max_wait_ms", Int(t.max_wait_ms, 0, 10'000)},
                  {"late_slack_scale", Dbl(t.late_slack_scale, 0.0, 1.0)}});
       }},
      {"controller",
       [&](const YAML::Node& n, const std::string& key) {
         auto& c = cfg.controller;
         ReadMap(n, key,
                 {{"tick_ms", Int(c.tick_ms, 1, 60'000)},
                  {"late_reports", Int(c.late_reports, 1, 1'000'000)},
                  {"lateness_jitter_us", Int(c.lateness_jitter_us, 0, 10'000'000)},
                  {"late_fraction", Dbl(c.late_fraction, 0.0, 1.0)},
                  {"profile_change_threshold", Dbl(c.profile_change_threshold, 0.0, 100.0)},
                  {"profile_change_reports", Int(c.profile_change_reports, 1, 1'000'000)},
                  {"overrun_ratio", Dbl(c.overrun_ratio, 0.0, 10.0)},
                  {"replan_cooldown_ms", Int(c.replan_cooldown_ms, 0, 86'400'000)},
                  {"offline_interval_ms", Int(c.offline_interval_ms, 0, 86'400'000)},
                  {"offline_budget_ms", Int(c.offline_budget_ms, 1, 600'000)},
                  {"offline_max_moves", Int(c.offline_max_moves, 0, 1'000'000)},
                  {"turns", Bool(c.turns)},
                  {"planning_parts", Int(c.planning_parts, 1, 64)},
                  {"planning_threads", Int(c.planning_threads, 1, 64)},
                  {"phase_history", Int(c.phase_history, 1, 100'000)}});
       }},
      {"kubernetes",
       [&](const YAML::Node& n, const std::string& key) {
         auto& k = cfg.kubernetes;
         ReadMap(n, key,
                 {{"enabled", Bool(k.enabled)},
                  {"rack_label", Str(k.rack_label)},
                  {"verify_pods", Bool(k.verify_pods)},
                  {"api_server", Str(k.api_server)},
                  {"token_file", Str(k.token_file)},
                  {"ca_file", Str(k.ca_file)}});
       }},
  };
  ReadMap(doc, "", top);
  if (inline_topology) cfg.topology_file.clear();
}

void LoadConfigFile(const std::string& path, ServiceConfig& cfg) {
  std::string text;
  if (!yaml_util::ReadWholeFile(path, text)) {
    throw ConfigError("--config", "cannot read file '" + path + "'");
  }
  try {
    LoadConfigYaml(text, cfg);
  } catch (const ConfigError& e) {
    throw ConfigError(e.Key(), e.Reason() + " (in " + path + ")");
  }
}

std::pair<std::string, int> ParseHostPort(const std::string& key, const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
    throw ConfigError(key, "expected HOST:PORT, got '" + value + "'");
  }
  const std::string port_text = value.substr(colon + 1);
  int port = 0;
  for (char ch : port_text) {
    if (ch < '0' || ch > '9') throw ConfigError(key, "port '" + port_text + "' is not a number");
    port = port * 10 + (ch - '0');
    if (port > 65535) break;
  }
  if (port > 65535) throw ConfigError(key, "port " + port_text + " is above 65535");
  return {value.substr(0, colon), port};
}

std::string ReadCurveKeyFile(const std::string& key, const std::string& path) {
  std::string text;
  if (!yaml_util::ReadWholeFile(path, text)) {
    throw ConfigError(key, "cannot read key file '" + path + "'");
  }
  const auto b = text.find_first_not_of(" \t\r\n");
  const auto e = text.find_last_not_of(" \t\r\n");
  text = b == std::string::npos ? "" : text.substr(b, e - b + 1);
  if (text.size() != 40) {
    throw ConfigError(key, "'" + path + "' must hold a 40-character Z85 CURVE key (has " +
                               std::to_string(text.size()) + " characters)");
  }
  return text;
}

void ServiceConfig::Validate() const {
  if (listen.rfind("tcp://", 0) != 0 && listen.rfind("ipc://", 0) != 0 &&
      listen.rfind("inproc://", 0) != 0) {
    throw ConfigError("listen",
                      "expected a ZeroMQ endpoint such as tcp://HOST:PORT, got '" + listen + "'");
  }
  ParseHostPort("http", http);
  if (std::find(kLogLevels.begin(), kLogLevels.end(), log_level) == kLogLevels.end()) {
    throw ConfigError("log_level",
                      "'" + log_level + "' is not one of trace, debug, info, warn, error, off");
  }
  if (http_tls.Enabled() || !http_tls.client_ca_file.empty()) {
    if (http_tls.cert_file.empty()) {
      throw ConfigError("http.tls_cert_file",
                        "is required with http.tls_key_file or http.tls_client_ca_file");
    }
    if (http_tls.key_file.empty()) {
      throw ConfigError("http.tls_key_file", "is required with http.tls_cert_file");
    }
  }
  const std::string& api = kubernetes.api_server;
  if (!api.empty() && api.rfind("http://", 0) != 0 && api.rfind("https://", 0) != 0) {
    throw ConfigError("kubernetes.api_server",
                      "expected a URL such as https://HOST:PORT, got '" + api + "'");
  }
  if (curve.secret_key_file.empty() != curve.public_key_file.empty()) {
    throw ConfigError("curve", "secret_key_file and public_key_file go together");
  }
  // Set from the command line too: the same ranges as in the file (their nanoseconds must not
  // overflow).
  if (registry.rank_timeout_ms < 100 || registry.rank_timeout_ms > 86'400'000) {
    throw ConfigError("registry.rank_timeout_ms", "must be in [100, 86400000]");
  }
  if (controller.offline_interval_ms < 0 || controller.offline_interval_ms > 86'400'000) {
    throw ConfigError("controller.offline_interval_ms", "must be in [0, 86400000]");
  }
  if (controller.offline_interval_ms > 0 &&
      controller.offline_budget_ms > controller.offline_interval_ms) {
    throw ConfigError("controller.offline_budget_ms", "must not exceed offline_interval_ms");
  }
  // A ratio at or below 1 would call every phase an overrun, however well it fits its window.
  if (controller.overrun_ratio > 0.0 && controller.overrun_ratio <= 1.0) {
    throw ConfigError("controller.overrun_ratio", "must be 0 (off) or above 1");
  }
}

}  // namespace metronome::service
