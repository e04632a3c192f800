#include "config.hpp"

#include "metronome/common/yield.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace metronome::shim {
namespace {

bool ParseInt(const char* s, long long& out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  out = v;
  return true;
}

// "high=N,normal=N,low=N", any subset in any order, N in 0..255. All or nothing.
bool ParseTrafficClasses(const char* v, int (&out)[3]) {
  int parsed[3] = {out[0], out[1], out[2]};
  std::string s(v);
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) return false;
    const std::string name = item.substr(0, eq);
    long long n = 0;
    if (!ParseInt(item.substr(eq + 1).c_str(), n) || n < 0 || n > 255) return false;
    if (name == "low") {
      parsed[0] = static_cast<int>(n);
    } else if (name == "normal") {
      parsed[1] = static_cast<int>(n);
    } else if (name == "high") {
      parsed[2] = static_cast<int>(n);
    } else {
      return false;
    }
    pos = end + 1;
  }
  for (int i = 0; i < 3; ++i) out[i] = parsed[i];
  return true;
}

void Warn(Config& c, const char* name, const char* value) {
  if (!c.warnings.empty()) c.warnings += "; ";
  c.warnings += std::string(name) + "='" + std::string(value).substr(0, 64) + "' ignored";
}

}  // namespace

Config ParseConfig(const std::function<const char*(const char*)>& get) {
  Config c;
  if (const char* v = get("METRONOME_LOG"); v != nullptr && *v != '\0') {
    if (!std::strcmp(v, "off")) {
      c.log_level = LogLevel::kOff;
    } else if (!std::strcmp(v, "error")) {
      c.log_level = LogLevel::kError;
    } else if (!std::strcmp(v, "warn")) {
      c.log_level = LogLevel::kWarn;
    } else if (!std::strcmp(v, "info")) {
      c.log_level = LogLevel::kInfo;
    } else if (!std::strcmp(v, "debug")) {
      c.log_level = LogLevel::kDebug;
    } else {
      Warn(c, "METRONOME_LOG", v);
    }
  }
  if (const char* v = get("METRONOME_MODE"); v != nullptr && *v != '\0') {
    if (!std::strcmp(v, "off")) {
      c.mode = Mode::kOff;
    } else if (!std::strcmp(v, "observe")) {
      c.mode = Mode::kObserve;
    } else if (!std::strcmp(v, "enforce")) {
      c.mode = Mode::kEnforce;
    } else {
      Warn(c, "METRONOME_MODE", v);
    }
  }
  if (const char* v = get("METRONOME_GATE"); v != nullptr && *v != '\0') {
    if (!std::strcmp(v, "auto")) {
      c.gate = GateKind::kAuto;
    } else if (!std::strcmp(v, "device")) {
      c.gate = GateKind::kDevice;
    } else if (!std::strcmp(v, "host")) {
      c.gate = GateKind::kHost;
    } else {
      Warn(c, "METRONOME_GATE", v);
    }
  }
  if (const char* v = get("METRONOME_TRAFFIC_CLASS"); v != nullptr && *v != '\0') {
    if (!ParseTrafficClasses(v, c.traffic_class)) Warn(c, "METRONOME_TRAFFIC_CLASS", v);
  }
  if (const char* v = get("METRONOME_MAX_WAIT_MS"); v != nullptr && *v != '\0') {
    long long ms = 0;
    if (ParseInt(v, ms) && ms >= 0 && ms <= 10'000) {
      c.max_wait_ns = ms * 1'000'000;
    } else {
      Warn(c, "METRONOME_MAX_WAIT_MS", v);
    }
  }
  if (const char* v = get("METRONOME_CHUNK_KIB"); v != nullptr && *v != '\0') {
    long long kib = 0;
    if (ParseInt(v, kib) && kib >= 0 && kib <= (1LL << 30)) {
      c.chunk_bytes = static_cast<uint64_t>(kib) << 10;
      if (c.chunk_bytes != 0 && c.chunk_bytes < kMinChunkBytes) {
        c.chunk_bytes = kMinChunkBytes;
        if (!c.warnings.empty()) c.warnings += "; ";
        c.warnings += "METRONOME_CHUNK_KIB='" + std::string(v) + "' raised to 64";
      }
    } else {
      Warn(c, "METRONOME_CHUNK_KIB", v);
    }
  }
  if (const char* v = get("METRONOME_FAILOPEN_MS"); v != nullptr && *v != '\0') {
    long long ms = 0;
    if (ParseInt(v, ms) && ms >= 100 && ms <= 600'000) {
      c.silence_ns = ms * 1'000'000;
    } else {
      Warn(c, "METRONOME_FAILOPEN_MS", v);
    }
  }
  if (const char* v = get("METRONOME_SCHEDULER"); v != nullptr && *v != '\0') {
    if (std::strlen(v) < 256) {
      c.scheduler = v;
    } else {
      Warn(c, "METRONOME_SCHEDULER", v);
    }
  }
  if (const char* v = get("METRONOME_JOB"); v != nullptr && *v != '\0') {
    c.job = std::string(v).substr(0, 200);
  }
  if (const char* v = get("METRONOME_PRIORITY"); v != nullptr && *v != '\0') {
    long long p = 0;
    if (!std::strcmp(v, "high")) {
      c.priority = 2;
    } else if (!std::strcmp(v, "normal")) {
      c.priority = 1;
    } else if (!std::strcmp(v, "low")) {
      c.priority = 0;
    } else if (ParseInt(v, p) && p >= -1'000'000 && p <= 1'000'000) {
      c.priority = static_cast<int32_t>(p);
    } else {
      Warn(c, "METRONOME_PRIORITY", v);
    }
  }
  if (const char* v = get("METRONOME_NODE_SHARE"); v != nullptr && *v != '\0') {
    if (!std::strcmp(v, "1") || !std::strcmp(v, "on")) {
      c.node_share = true;
    } else if (!std::strcmp(v, "0") || !std::strcmp(v, "off")) {
      c.node_share = false;
    } else {
      Warn(c, "METRONOME_NODE_SHARE", v);
    }
  }
  if (const char* v = get("METRONOME_SHARE_DIR"); v != nullptr && *v != '\0') {
    if (v[0] == '/' && std::strlen(v) < 200) {
      c.share_dir = v;
    } else {
      Warn(c, "METRONOME_SHARE_DIR", v);
    }
  }
  if (const char* v = get("METRONOME_NCCL_LIBRARY"); v != nullptr && *v != '\0') {
    c.nccl_library = v;
  }
  if (const char* v = get("METRONOME_CURVE_SERVERKEY"); v != nullptr && *v != '\0') {
    // The key file's content as Kubernetes puts it into the environment: with its newline.
    std::string key(v, strnlen(v, 64));
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    if (key.size() == 40) {
      c.curve_server_key = key;
    } else {
      Warn(c, "METRONOME_CURVE_SERVERKEY", "(not a 40-character Z85 key)");
    }
  }
  // As given: the encoder bounds what the hello carries (cut between characters), and a name
  // cut short then names no pod the scheduler knows.
  const auto pod_field = [&](const char* name, std::string& out) {
    if (const char* v = get(name); v != nullptr) out = v;
  };
  pod_field("METRONOME_NAMESPACE", c.pod_namespace);
  pod_field("METRONOME_POD", c.pod_name);
  pod_field("METRONOME_POD_UID", c.pod_uid);
  if (const char* v = get("NODE_NAME"); v != nullptr && *v != '\0') {
    c.node = std::string(v).substr(0, 200);
  } else {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) c.node = host;
    if (c.node.empty()) c.node = "unknown";
  }
  return c;
}

Config ConfigFromEnv() {
  return ParseConfig([](const char* name) -> const char* {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): Metronome never calls setenv
    return std::getenv(name);
  });
}

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kOff:
      return "off";
    case Mode::kObserve:
      return "observe";
    case Mode::kEnforce:
      return "enforce";
  }
  return "?";
}

const char* GateKindName(GateKind g) {
  switch (g) {
    case GateKind::kAuto:
      return "auto";
    case GateKind::kDevice:
      return "device";
    case GateKind::kHost:
      return "host";
  }
  return "?";
}

}  // namespace metronome::shim
