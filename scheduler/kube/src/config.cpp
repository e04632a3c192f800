// In-cluster configuration (see config.hpp).
#include "metronome/kube/config.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace metronome::kube {

std::string Error::ToString() const {
  std::string out = status == 0 ? std::string("no answer") : "HTTP " + std::to_string(status);
  if (!reason.empty()) out += " " + reason;
  if (!message.empty()) out += ": " + message;
  return out;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{0, "ConfigError", "cannot read " + path};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

Result<ClientConfig> InClusterConfig(const std::string& sa_dir,
                                     const std::function<const char*(const char*)>& getenv_fn) {
  const auto env = [&](const char* name) -> std::string {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): Metronome never calls setenv
    const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  const std::string host = env("KUBERNETES_SERVICE_HOST");
  const std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return Error{0, "ConfigError",
                 "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                 "must be set"};
  }
  ClientConfig cfg;
  // An IPv6 service address needs brackets in a URL.
  const bool v6 = host.find(':') != std::string::npos;
  cfg.server = "https://" + (v6 ? "[" + host + "]" : host) + ":" + port;
  cfg.token_file = sa_dir + "/token";
  auto token = ReadFile(cfg.token_file);
  if (!token) return token.GetError();
  cfg.token = Trim(*token);
  if (cfg.token.empty()) return Error{0, "ConfigError", cfg.token_file + " is empty"};
  cfg.ca_file = sa_dir + "/ca.crt";
  if (auto ca = ReadFile(cfg.ca_file); !ca) return ca.GetError();
  if (auto ns = ReadFile(sa_dir + "/namespace"); ns && !Trim(*ns).empty()) {
    cfg.namespace_name = Trim(*ns);
  }
  return cfg;
}

}  // namespace metronome::kube
