// metronome-scheduler: the daemon. Embedded defaults < --config FILE < flags.
// Exit codes: 0 stopped by SIGINT/SIGTERM (or --check passed), 1 runtime failure (cannot bind),
// 2 bad configuration or command line.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include "metronome/extender/extender.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/kubernetes.hpp"
#include "metronome/service/leadership.hpp"
#include "metronome/service/service.hpp"

namespace {

// Every YAML key, for --help (docs/scheduler.md has the same table with more words).
constexpr const char* kConfigKeys = R"(
Configuration file keys (YAML, --config; flags override them):
  listen: tcp://127.0.0.1:7411         ZeroMQ ROUTER endpoint for shims (--listen)
  http: 127.0.0.1:7412                 HTTP address: API, /metrics, timeline (--http); or a
                                       mapping {address: HOST:PORT, tls_*} for HTTPS:
  http.tls_cert_file / http.tls_key_file
                                       serve HTTPS only: PEM certificate (chain) and its
                                       unencrypted key, re-read when the files change
                                       (--http-tls-cert-file, --http-tls-key-file)
  http.tls_client_ca_file              PEM CA(s): clients must present a certificate they
                                       signed (--http-tls-client-ca-file)
  http.rate_limit: 1000                requests a second from one client address, in bursts of
                                       twice that; beyond it 429 (0: no limit)
  log_level: info                      trace|debug|info|warn|error|critical|off (--log-level)
  topology: FILE | {inline}            topology file or inline mapping (--topology); default:
                                       one 100 Gbit/s link "default" all multi-node jobs cross
  curve.secret_key_file / curve.public_key_file
                                       ZeroMQ CURVE server keys, Z85 (--curve-*-key-file)
  registry.rank_timeout_ms: 10000      a rank silent this long is dropped; its job when empty
  registry.report_interval_ms: 1000    report interval told to shims in Welcome
  registry.max_clients: 100000         peers beyond this are rejected
  planning.min_confidence: 0.5         profiles below this confidence are not planned
  planning.saturate_fraction: 0.1      fastest phase's rate >= this x capacity: saturating job
  planning.wire_margin: 0.15           saturating job's window = wire time of its bytes x (1+this),
                                       at most (less where its median phase shows less overhead)
  planning.period_margin: 0.0          planned period >= measured natural period x (1+this)
  planning.epoch_ns: 0                 reference instant of every timetable (scheduler clock)
  planning.max_stretch: 4.0            a gated job's period is at most this x its own
  planning.min_cushion_us: 2000        gap after every gated window, at least (clock + gate error)
  planning.jitter_cushion: 3.0         ... and at least this x the job's measured jitter (sigma)
  timetable.max_wait_ms: 10000         cap on max_wait (max_wait = min(period - window, cap))
  timetable.late_slack_scale: 1.0      late_slack = scale x the planned cushion
  controller.tick_ms: 100              timeouts / offline results checked this often
  controller.lateness_jitter_us: 1000  a phase within slack + this (or the rank's clock error) is on time
  controller.late_reports: 5           late reports in a row that trigger a re-plan
  controller.late_fraction: 0.5        share of a report's phases that makes it late
  controller.profile_change_threshold: 0.1   relative change of period or comm that counts
  controller.profile_change_reports: 3 changed reports in a row that trigger a re-plan
  controller.overrun_ratio: 1.1        gated phases this much over their window widen it (0 = off)
  controller.replan_cooldown_ms: 5000  at most one controller re-plan per job this often
  controller.offline_interval_ms: 10000  background recalculation period (0 = off)
  controller.offline_budget_ms: 200    time budget of one background search
  controller.offline_max_moves: 8      better plans moving more jobs than this are skipped
  controller.turns: true               the two jobs of a link only they cross take turns: the
                                       service relays their phase edges between their shims
  controller.planning_parts: 8         parts of the cluster planned apart
  controller.planning_threads: 2       rounds of different parts that run at once
  controller.phase_history: 256        measured phases kept per job
  kubernetes.enabled: false            read Nodes, TrafficProfiles, pods from the API server
                                       (in-cluster) and write LinkSchedules; the extender
                                       (POST /extender/filter, /prioritize) is always on
  kubernetes.rack_label: topology.kubernetes.io/zone   node label that names a node's rack
  kubernetes.verify_pods: true         with enabled: a shim's hello must name its pod, which the
                                       API server knows on that node in that job; the job's
                                       priority is then the pod's spec.priority
  kubernetes.api_server / token_file / ca_file
                                       the API server outside a pod: URL, bearer-token file,
                                       CA file (empty: the in-cluster configuration)
Topology file: {links: [{name, capacity_gbps}], racks: [{name, uplink_gbps, nodes: [{name,
  nic_gbps}]}], two_tier: {racks, nodes_per_rack, nic_gbps, uplink_gbps}, unknown_nodes_link}
  (rates also as *_mbps; a scenario file with a `topology:` section works as is).
Exit codes: 0 normal stop, 1 runtime failure (cannot bind), 2 bad configuration.)";

// A duration as kube-scheduler's flags take it: "6s", "500ms", or a plain number of seconds.
std::chrono::milliseconds ParseDuration(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const double ms = unit == "ms" ? value : unit.empty() || unit == "s" ? value * 1000 : -1;
  if (used == 0 || !(ms > 0) || ms > 3.6e6) {
    throw metronome::service::ConfigError(flag,
                                          "expected a duration such as 6s or 500ms (at most "
                                          "1h), got '" +
                                              text + "'");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

// This replica's name in the Lease: the pod's (POD_NAME, from the downward API) or the host's,
// and a random suffix so that a restarted process is a new candidate, as in kube-scheduler.
std::string ElectionIdentity() {
  std::string base;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts.
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') base = pod;
  if (base.empty()) {
    char host[256] = {};
    base = gethostname(host, sizeof host - 1) == 0 ? host : "metronome-scheduler";
  }
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "_%08x", rd());
  return base + suffix;
}

int Run(int argc, char** argv) {
  using metronome::service::ConfigError;
  using metronome::service::ServiceConfig;

  CLI::App app{
      "metronome-scheduler: plans when training jobs may communicate and tells their "
      "shims (ZeroMQ), serves the status API, metrics and timeline page (HTTP)."};
  app.footer(kConfigKeys);
  std::string config_file, listen, http, topology, log_level, curve_secret, curve_public;
  std::string tls_cert, tls_key, tls_client_ca;
  int64_t rank_timeout_ms = -1, offline_interval_ms = -1;
  bool check = false;
  app.add_option("-c,--config", config_file, "YAML configuration file (keys below)");
  app.add_option("--listen", listen, "ZeroMQ endpoint for shims [tcp://127.0.0.1:7411]");
  app.add_option("--http", http, "HTTP address HOST:PORT [127.0.0.1:7412]");
  app.add_option("--http-tls-cert-file", tls_cert,
                 "serve HTTPS: PEM certificate file (http.tls_cert_file)");
  app.add_option("--http-tls-key-file", tls_key, "its PEM private key (http.tls_key_file)");
  app.add_option("--http-tls-client-ca-file", tls_client_ca,
                 "require client certificates signed by this PEM CA (http.tls_client_ca_file)");
  app.add_option("--topology", topology, "topology YAML file [one-link default]");
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error, critical or off [info]");
  app.add_option("--curve-secret-key-file", curve_secret,
                 "enable CURVE: file with the server's Z85 secret key");
  app.add_option("--curve-public-key-file", curve_public,
                 "file with the matching Z85 public key (give it to the shims)");
  app.add_option("--rank-timeout-ms", rank_timeout_ms,
                 "drop a rank silent this long (registry.rank_timeout_ms) [10000]");
  app.add_option("--offline-interval-ms", offline_interval_ms,
                 "background recalculation period, 0 = off (controller.offline_interval_ms)");
  app.add_flag("--check", check, "validate the configuration and topology, then exit");
  bool leader_elect = false;
  std::string lease_duration = "6s", renew_deadline = "4s", retry_period = "1s";
  std::string lease_name = "metronome-scheduler", lease_namespace;
  app.add_flag("--leader-elect", leader_elect,
               "run as one of several replicas: plan only while holding the Lease (the API "
               "server as in kubernetes.*); a standby serves /healthz, /readyz says 503");
  app.add_option("--leader-elect-lease-duration", lease_duration,
                 "how long a standby waits after the leader's last renewal [6s]");
  app.add_option("--leader-elect-renew-deadline", renew_deadline,
                 "a leader that has not renewed for this long exits [4s]");
  app.add_option("--leader-elect-retry-period", retry_period,
                 "how often candidates try and the leader renews [1s]");
  app.add_option("--leader-elect-resource-name", lease_name,
                 "the Lease's name [metronome-scheduler]");
  app.add_option("--leader-elect-resource-namespace", lease_namespace,
                 "the Lease's namespace [POD_NAMESPACE, else the in-cluster one, else default]");
  std::string keygen;
  app.add_option("--generate-curve-keys", keygen,
                 "write a new CURVE key pair to PREFIX.key (secret) and PREFIX.pub, then exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  if (!keygen.empty()) {
    char pub[41] = {}, sec[41] = {};
    if (zmq_curve_keypair(pub, sec) != 0) {
      std::fprintf(stderr, "metronome-scheduler: this libzmq has no CURVE support\n");
      return 1;
    }
    const std::string sec_path = keygen + ".key", pub_path = keygen + ".pub";
    const mode_t old = umask(077);
    std::FILE* fs = std::fopen(sec_path.c_str(), "w");
    umask(old);
    std::FILE* fp = std::fopen(pub_path.c_str(), "w");
    if (fs == nullptr || fp == nullptr) {
      std::fprintf(stderr, "metronome-scheduler: cannot write %s / %s\n", sec_path.c_str(),
                   pub_path.c_str());
      if (fs != nullptr) std::fclose(fs);
      if (fp != nullptr) std::fclose(fp);
      return 1;
    }
    std::fprintf(fs, "%s\n", sec);
    std::fprintf(fp, "%s\n", pub);
    std::fclose(fs);
    std::fclose(fp);
    std::printf("wrote %s (secret, mode 0600) and %s (public: give it to the shims)\n",
                sec_path.c_str(), pub_path.c_str());
    return 0;
  }

  ServiceConfig cfg;
  metronome::kube::LeaderElectionConfig election;
  metronome::kube::ClientConfig api_config;
  try {
    if (!config_file.empty()) metronome::service::LoadConfigFile(config_file, cfg);
    if (!listen.empty()) cfg.listen = listen;
    if (!http.empty()) cfg.http = http;
    if (!tls_cert.empty()) cfg.http_tls.cert_file = tls_cert;
    if (!tls_key.empty()) cfg.http_tls.key_file = tls_key;
    if (!tls_client_ca.empty()) cfg.http_tls.client_ca_file = tls_client_ca;
    if (!topology.empty()) cfg.topology_file = topology;
    if (!log_level.empty()) cfg.log_level = log_level;
    if (!curve_secret.empty()) cfg.curve.secret_key_file = curve_secret;
    if (!curve_public.empty()) cfg.curve.public_key_file = curve_public;
    if (rank_timeout_ms >= 0) {
      if (rank_timeout_ms < 100) throw ConfigError("--rank-timeout-ms", "must be >= 100");
      cfg.registry.rank_timeout_ms = rank_timeout_ms;
    }
    if (offline_interval_ms >= 0) cfg.controller.offline_interval_ms = offline_interval_ms;
    cfg.Validate();
    if (leader_elect) {
      election.lease_duration = ParseDuration("--leader-elect-lease-duration", lease_duration);
      election.renew_deadline = ParseDuration("--leader-elect-renew-deadline", renew_deadline);
      election.retry_period = ParseDuration("--leader-elect-retry-period", retry_period);
      election.name = lease_name;
      election.identity = ElectionIdentity();
      auto api = metronome::service::ApiServerConfig(cfg.kubernetes);
      if (!api) {
        throw ConfigError("--leader-elect", "needs the API server: " + api.GetError().ToString());
      }
      api_config = std::move(api).Value();
      // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts.
      const char* pod_ns = std::getenv("POD_NAMESPACE");
      election.namespace_name = !lease_namespace.empty()       ? lease_namespace
                                : pod_ns != nullptr && *pod_ns ? std::string(pod_ns)
                                                               : api_config.namespace_name;
      if (const std::string bad = metronome::kube::CheckLeaderElection(election); !bad.empty()) {
        throw ConfigError("--leader-elect", bad);
      }
    }
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "metronome-scheduler: configuration error: %s: %s\n", e.Key().c_str(),
                 e.Reason().c_str());
    return 2;
  }

  auto logger = spdlog::stderr_color_mt("metronome");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));

  // One connection per shim process: raise the descriptor limit to what the system allows.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  // Block the stop signals in every thread; the main thread waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    // Declared before the service so that it outlives the HTTP routes that call it.
    std::unique_ptr<metronome::extender::Extender> extender;
    metronome::service::Service service(cfg);
    std::unique_ptr<metronome::service::KubernetesSync> kube;
    if (check) {
      std::printf("configuration ok: listen=%s http=%s%s links=%zu\n", cfg.listen.c_str(),
                  cfg.http_tls.Enabled() ? "https://" : "", cfg.http.c_str(),
                  (*service.LinksJson(1, ""))["total"].get<size_t>());
      return 0;
    }
    // The kube-scheduler extender on the same HTTP server, fed on every plan change, and with
    // kubernetes.enabled the API server's Nodes, TrafficProfiles, pods and LinkSchedules.
    extender = std::make_unique<metronome::extender::Extender>(
        metronome::service::ExtenderConfigFor(cfg.kubernetes), nullptr);
    kube = std::make_unique<metronome::service::KubernetesSync>(service, *extender, cfg.kubernetes);
    std::unique_ptr<metronome::service::Leadership> leadership;
    if (leader_elect) {
      leadership =
          std::make_unique<metronome::service::Leadership>(service, *kube, api_config, election);
      leadership->Start();  // the service and the Kubernetes side start when it leads
    } else {
      service.Start();
      if (cfg.kubernetes.enabled) kube->Start();  // logs an error and goes on without it
    }
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("scheduler: signal {}: stopping", sig);
    if (leadership) leadership->Stop();
    if (kube) kube->Stop();
    service.Stop();
    if (leadership) leadership->Resign();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "metronome-scheduler: configuration error: %s: %s\n", e.Key().c_str(),
                 e.Reason().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metronome-scheduler: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

// Run's error paths return their exit codes; anything else thrown ends the program here with 1
// (instead of std::terminate).
int main(int argc, char** argv) {
  // glibc gives each thread that allocates its own heap (up to 8 a core), and a heap keeps its
  // peak: the status API's threads each building thousands of jobs' JSON held the resident size
  // of an 8,192-job scheduler at 1 GiB where two heaps hold it at 0.53 GiB. The environment's
  // MALLOC_ARENA_MAX, where set, decides instead.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): before any thread starts.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metronome-scheduler: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "metronome-scheduler: unknown exception\n");
  }
  return 1;
}
