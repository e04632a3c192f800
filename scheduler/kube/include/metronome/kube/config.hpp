// How to reach the API server: in-cluster (service-account token and CA, the
// KUBERNETES_SERVICE_HOST/PORT variables) or given explicitly (tests, out-of-cluster runs).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "metronome/kube/result.hpp"

namespace metronome::kube {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct ClientConfig {
  std::string server;      // "https://10.96.0.1:443" or "http://127.0.0.1:8080" (tests)
  std::string token;       // bearer token (empty: none)
  std::string token_file;  // re-read every token_refresh (bound tokens rotate); wins over token
  std::string ca_file;     // PEM bundle that signs the API server's certificate
  std::string namespace_name = "default";  // the pod's own namespace
  bool verify_tls = true;

  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds request_timeout{10'000};  // read/write timeout of one request
  std::chrono::seconds watch_timeout{300};            // server-side timeoutSeconds of a watch
  std::chrono::seconds token_refresh{60};
  int max_attempts = 4;  // per request, transient errors only (no answer, 429, 5xx)
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{3'000};
  std::string user_agent = "metronome-scheduler/0.1";
};

// Reads the in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT
// from the environment (through `getenv`, replaceable in tests), the token, ca.crt and
// namespace files from `sa_dir`. Fails with a message naming what is missing.
Result<ClientConfig> InClusterConfig(
    const std::string& sa_dir = kServiceAccountDir,
    const std::function<const char*(const char*)>& getenv_fn = nullptr);

// Reads a whole file; an error names the path.
Result<std::string> ReadFile(const std::string& path);

// `s` without leading and trailing whitespace (a token or namespace file ends with a newline).
std::string Trim(const std::string& s);

}  // namespace metronome::kube
