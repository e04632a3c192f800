// Typed reads from yaml-cpp nodes that fail with ConfigError naming the key path.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "metronome/service/config.hpp"

namespace metronome::service::yaml_util {

// Reads a whole file; false when it cannot be opened.
inline bool ReadWholeFile(const std::string& path, std::string& out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  out.clear();
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return true;
}

inline std::string Child(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

inline std::string Index(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

inline std::string ReadString(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw ConfigError(key, "must be a string");
  return n.Scalar();
}

inline double ReadDouble(const YAML::Node& n, const std::string& key, double lo, double hi) {
  double v = 0.0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
    throw ConfigError(key, "must be a number, got '" + (n.IsScalar() ? n.Scalar() : "?") + "'");
  }
  if (v < lo || v > hi) {
    throw ConfigError(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "], got " + n.Scalar());
  }
  return v;
}

inline int64_t ReadInt(const YAML::Node& n, const std::string& key, int64_t lo, int64_t hi) {
  long long v = 0;
  if (!n.IsScalar() || !YAML::convert<long long>::decode(n, v)) {
    throw ConfigError(key, "must be an integer, got '" + (n.IsScalar() ? n.Scalar() : "?") + "'");
  }
  if (v < lo || v > hi) {
    throw ConfigError(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "], got " + n.Scalar());
  }
  return static_cast<int64_t>(v);
}

}  // namespace metronome::service::yaml_util
