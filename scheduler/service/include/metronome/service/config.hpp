// The scheduler's configuration: every setting, its embedded default, and the YAML loader.
//
// Precedence: embedded defaults < the YAML file (--config) < command-line flags. Every key is
// documented in docs/scheduler.md ("Configuration reference") and in `metronome-scheduler --help`.
// A bad value fails loading with ConfigError naming the key ("controller.late_reports") and why.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "metronome/controller/config.hpp"

namespace metronome::service {

// The controller's settings (metronome/controller/config.hpp), under the names the service's
// configuration has always used for them.
using controller::ControllerConfig;
using controller::PlanningConfig;
using controller::RegistryConfig;
using controller::TimetableConfig;
using controller::TopologyConfig;

// `text` with control bytes written as \xNN: a key or value from a file may hold any byte, and
// an error message must print as what it names.
std::string Printable(std::string_view text);

class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string key, std::string reason)
      : ConfigError(Printable(key), Printable(reason), 0) {}
  const std::string& Key() const { return key_; }
  const std::string& Reason() const { return reason_; }

 private:
  ConfigError(std::string key, std::string reason, int /*printable*/)
      : std::runtime_error(key + ": " + reason), key_(std::move(key)), reason_(std::move(reason)) {}
  std::string key_;
  std::string reason_;
};

struct CurveConfig {
  std::string secret_key_file;  // Z85 text (40 characters), as zmq_curve_keypair writes it
  std::string public_key_file;  // the matching public key; checked against the secret one
  bool Enabled() const { return !secret_key_file.empty(); }
};

// HTTPS for the HTTP server, e.g. for kube-scheduler's `enableHTTPS: true` extender calls. PEM
// files: the certificate (chain) and its unencrypted key are read at start and again whenever
// they change on disk (a renewed Kubernetes Secret); the client CA, when set, makes a client
// certificate signed by it mandatory (read at start only).
struct HttpTlsConfig {
  std::string cert_file;       // http.tls_cert_file
  std::string key_file;        // http.tls_key_file
  std::string client_ca_file;  // http.tls_client_ca_file (optional)
  bool Enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// The Kubernetes side: the kube-scheduler extender is always mounted (/extender/...); with
// `enabled` the scheduler also reads Nodes, TrafficProfiles and Metronome pods from the API
// server (in-cluster config) and writes LinkSchedule objects.
struct KubernetesConfig {
  bool enabled = false;
  std::string rack_label = "topology.kubernetes.io/zone";  // node label naming a node's rack
  // With `enabled`: a shim's hello must name its pod (downward API), which the API server must
  // know on the hello's node and in the hello's job; the job's priority is then the pod's
  // spec.priority. Off: the shim's environment decides both (docs/kubernetes.md).
  bool verify_pods = true;
  // The API server outside a pod (a scheduler on a control-plane node, tests): its URL, a file
  // with a bearer token and the CA that signs its certificate. Empty: the in-cluster
  // configuration (service-account token, KUBERNETES_SERVICE_HOST/PORT).
  std::string api_server;
  std::string token_file;
  std::string ca_file;
};

struct ServiceConfig {
  std::string listen = "tcp://127.0.0.1:7411";  // ZeroMQ ROUTER endpoint
  std::string http = "127.0.0.1:7412";          // HOST:PORT of the HTTP server
  HttpTlsConfig http_tls;  // YAML: `http: {address: HOST:PORT, tls_cert_file: ..., ...}`
  // http.rate_limit: requests a second from one client address (bursts of twice it); 0: off.
  // kube-scheduler asks filter and prioritize for every pod it places.
  double http_rate_limit = 1000.0;
  std::string log_level = "info";
  std::string topology_file;  // empty: inline `topology:` or the embedded default
  TopologyConfig topology = TopologyConfig::Default();
  CurveConfig curve;
  RegistryConfig registry;
  PlanningConfig planning;
  TimetableConfig timetable;
  ControllerConfig controller;
  KubernetesConfig kubernetes;

  // Checks cross-field rules (addresses parse, levels exist, ranges); throws ConfigError.
  void Validate() const;
};

// Merges a YAML document into `cfg`. Unknown keys, wrong types and out-of-range values throw
// ConfigError with the full key path. `source` names the file in messages.
void LoadConfigYaml(const std::string& yaml_text, ServiceConfig& cfg);
void LoadConfigFile(const std::string& path, ServiceConfig& cfg);
TopologyConfig LoadTopologyFile(const std::string& path);
TopologyConfig ParseTopologyYaml(const std::string& yaml_text, const std::string& key_prefix);

// Splits "HOST:PORT"; throws ConfigError(key, ...) when it does not parse.
std::pair<std::string, int> ParseHostPort(const std::string& key, const std::string& value);

// Reads a CURVE key file: 40 Z85 characters (surrounding whitespace ignored).
std::string ReadCurveKeyFile(const std::string& key, const std::string& path);

}  // namespace metronome::service
