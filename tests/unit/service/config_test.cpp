// Configuration: embedded defaults, YAML merging, and errors that name the key and the reason.
#include <gtest/gtest.h>

#include <limits>

#include "metronome/service/config.hpp"

namespace metronome::service {
namespace {

std::string ErrorKey(const std::string& yaml) {
  ServiceConfig cfg;
  try {
    LoadConfigYaml(yaml, cfg);
    cfg.Validate();
  } catch (const ConfigError& e) {
    return e.Key() + " | " + e.Reason();
  }
  return "";
}

TEST(Config, EmbeddedDefaultsAreValidAndLoopback) {
  ServiceConfig cfg;
  EXPECT_NO_THROW(cfg.Validate());
  EXPECT_EQ(cfg.listen, "tcp://127.0.0.1:7411");
  EXPECT_EQ(cfg.http, "127.0.0.1:7412");
  ASSERT_EQ(cfg.topology.links.size(), 1u);
  EXPECT_EQ(cfg.topology.links[0].name, "default");
  EXPECT_DOUBLE_EQ(cfg.topology.links[0].capacity_bytes_per_s, 12.5e9);
  EXPECT_EQ(cfg.topology.unknown_nodes_link, "default");
}

TEST(Config, AnErrorPrintsTheKeyItNamesEvenOfControlBytes) {
  // Keys of NUL and escape bytes (YAML's "\0" and "\e"; found by fuzz_service_config): the
  // message shows them instead of ending at the NUL or recolouring the terminal.
  EXPECT_EQ(ErrorKey("\"\\0\\e[31m\": 1\n"), "\\x00\\x1b[31m | unknown key");
  ServiceConfig cfg;
  try {
    LoadConfigYaml("registry:\n  \"a\\0b\": 1\n", cfg);
    ADD_FAILURE() << "an unknown key loaded";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "registry.a\\x00b: unknown key");
  }
}

TEST(Config, YamlOverridesOnlyWhatItNames) {
  ServiceConfig cfg;
  LoadConfigYaml(
      "listen: tcp://0.0.0.0:9000\n"
      "registry: {rank_timeout_ms: 2500}\n"
      "controller:\n  late_reports: 9\n  late_fraction: 0.25\n"
      "timetable: {late_slack_scale: 0.5}\n",
      cfg);
  EXPECT_EQ(cfg.listen, "tcp://0.0.0.0:9000");
  EXPECT_EQ(cfg.http, "127.0.0.1:7412");
  EXPECT_EQ(cfg.registry.rank_timeout_ms, 2500);
  EXPECT_EQ(cfg.registry.report_interval_ms, 1000u);
  EXPECT_EQ(cfg.controller.late_reports, 9u);
  EXPECT_DOUBLE_EQ(cfg.controller.late_fraction, 0.25);
  EXPECT_DOUBLE_EQ(cfg.timetable.late_slack_scale, 0.5);
  ServiceConfig empty;
  EXPECT_NO_THROW(LoadConfigYaml("", empty));
}

TEST(Config, KubernetesKeys) {
  ServiceConfig cfg;
  EXPECT_FALSE(cfg.kubernetes.enabled);
  EXPECT_EQ(cfg.kubernetes.rack_label, "topology.kubernetes.io/zone");
  LoadConfigYaml("kubernetes:\n  enabled: true\n  rack_label: example.com/rack\n", cfg);
  EXPECT_TRUE(cfg.kubernetes.enabled);
  EXPECT_EQ(cfg.kubernetes.rack_label, "example.com/rack");
  EXPECT_EQ(ErrorKey("kubernetes: {enabled: maybe}\n"),
            "kubernetes.enabled | must be true or false, got 'maybe'");
  EXPECT_EQ(ErrorKey("kubernetes: {rack_label: [a]}\n"),
            "kubernetes.rack_label | must be a string");
  EXPECT_EQ(ErrorKey("kubernetes: {enable: true}\n"), "kubernetes.enable | unknown key");
  // Outside a pod: the API server's URL, token and CA files.
  EXPECT_TRUE(cfg.kubernetes.api_server.empty());
  LoadConfigYaml(
      "kubernetes:\n  api_server: https://10.0.0.1:6443\n  token_file: /t\n  ca_file: /c\n", cfg);
  EXPECT_EQ(cfg.kubernetes.api_server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg.kubernetes.token_file, "/t");
  EXPECT_EQ(cfg.kubernetes.ca_file, "/c");
  EXPECT_EQ(ErrorKey("kubernetes: {api_server: 10.0.0.1:6443}\n"),
            "kubernetes.api_server | expected a URL such as https://HOST:PORT, got "
            "'10.0.0.1:6443'");
  EXPECT_EQ(ErrorKey("kubernetes: true\n"), "kubernetes | must be a mapping");
}

TEST(Config, HttpTakesAnAddressOrAMappingWithTls) {
  ServiceConfig cfg;
  EXPECT_FALSE(cfg.http_tls.Enabled());
  LoadConfigYaml("http: 0.0.0.0:8000\n", cfg);
  EXPECT_EQ(cfg.http, "0.0.0.0:8000");
  EXPECT_FALSE(cfg.http_tls.Enabled());
  LoadConfigYaml(
      "http:\n  address: 0.0.0.0:7412\n  tls_cert_file: /tls/tls.crt\n"
      "  tls_key_file: /tls/tls.key\n  tls_client_ca_file: /tls/ca.crt\n",
      cfg);
  EXPECT_EQ(cfg.http, "0.0.0.0:7412");
  EXPECT_TRUE(cfg.http_tls.Enabled());
  EXPECT_EQ(cfg.http_tls.cert_file, "/tls/tls.crt");
  EXPECT_EQ(cfg.http_tls.key_file, "/tls/tls.key");
  EXPECT_EQ(cfg.http_tls.client_ca_file, "/tls/ca.crt");
  EXPECT_NO_THROW(cfg.Validate());
  // Certificate and key go together; a client CA needs both. (Bad files are found when the
  // server loads them: tests/integration/service/https_test.cpp.)
  const std::string need_cert =
      "http.tls_cert_file | is required with http.tls_key_file or http.tls_client_ca_file";
  for (const auto& [yaml, error] : std::vector<std::pair<std::string, std::string>>{
           {"http: {tls_cert_file: /a.crt}\n",
            "http.tls_key_file | is required with http.tls_cert_file"},
           {"http: {tls_key_file: /a.key}\n", need_cert},
           {"http: {tls_client_ca_file: /ca.crt}\n", need_cert},
           {"http: {tls_cert: /a.crt}\n", "http.tls_cert | unknown key"},
           {"http: {address: [1]}\n", "http.address | must be a string"},
           {"http: {address: nowhere}\n", "http | expected HOST:PORT, got 'nowhere'"}}) {
    EXPECT_EQ(ErrorKey(yaml), error) << yaml;
  }
}

TEST(Config, ErrorsNameTheKeyAndTheReason) {
  EXPECT_EQ(ErrorKey("controler: {}\n"), "controler | unknown key");
  EXPECT_EQ(ErrorKey("registry: {max_clients: 0}\n").substr(0, 23), "registry.max_clients | ");
  EXPECT_NE(
      ErrorKey("planning: {min_confidence: 2}\n").find("planning.min_confidence | must be in"),
      std::string::npos);
  EXPECT_NE(ErrorKey("timetable: {max_wait_ms: abc}\n").find("must be an integer"),
            std::string::npos);
  EXPECT_NE(ErrorKey("http: 127.0.0.1:99999\n").find("http | port 99999 is above 65535"),
            std::string::npos);
  EXPECT_NE(ErrorKey("curve: {secret_key_file: /x}\n").find("curve | "), std::string::npos);
  EXPECT_NE(ErrorKey("controller: {offline_interval_ms: 100, offline_budget_ms: 500}\n")
                .find("controller.offline_budget_ms"),
            std::string::npos);
  EXPECT_NE(ErrorKey("controller: {overrun_ratio: 1.0}\n")
                .find("controller.overrun_ratio | must be 0 (off) or above 1"),
            std::string::npos);
  EXPECT_EQ(ErrorKey("controller: {overrun_ratio: 0}\n"), "");
  EXPECT_NE(ErrorKey("- a\n- b\n").find("(document) | must be a mapping"), std::string::npos);
}

TEST(Topology, ScenarioFormatWithRatesInBits) {
  const TopologyConfig t = ParseTopologyYaml(
      "topology:\n"
      "  racks:\n"
      "    - name: r0\n      uplink_gbps: 8\n"
      "      nodes: [{name: a, nic_mbps: 800, gpus: 4, gpu: A100}, {name: b}]\n"
      "  links: [{name: spine, capacity_gbps: 80}]\n"
      "  unknown_nodes_link: spine\n"
      "jobs: ignored\n",
      "topology");
  ASSERT_EQ(t.racks.size(), 1u);
  EXPECT_DOUBLE_EQ(t.racks[0].uplink_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(t.racks[0].nodes[0].nic_bytes_per_s, 1e8);
  EXPECT_DOUBLE_EQ(t.racks[0].nodes[1].nic_bytes_per_s, 0.0);
  EXPECT_EQ(t.unknown_nodes_link, "spine");
  EXPECT_DOUBLE_EQ(t.links[0].capacity_bytes_per_s, 1e10);
}

TEST(Topology, TwoTierAndErrors) {
  const TopologyConfig t = ParseTopologyYaml(
      "two_tier: {racks: 2, nodes_per_rack: 3, nic_gbps: 100, uplink_gbps: 200}\n", "topology");
  ASSERT_TRUE(t.two_tier);
  EXPECT_EQ(t.two_tier->racks, 2u);
  EXPECT_TRUE(t.unknown_nodes_link.empty());
  auto key = [](const std::string& y) {
    try {
      (void)ParseTopologyYaml(y, "topology");
    } catch (const ConfigError& e) {
      return e.Key();
    }
    return std::string();
  };
  EXPECT_EQ(key("links: [{name: a}]\n"), "topology.links[0].capacity_gbps");
  EXPECT_EQ(key("links: [{name: a, capacity_gbps: 1, capacity_mbps: 1}]\n"),
            "topology.links[0].capacity_gbps");
  EXPECT_EQ(key("links: [{name: a, capacity_gbps: 1}, {name: a, capacity_gbps: 1}]\n"),
            "topology.links[1].name");
  EXPECT_EQ(key("racks: [{name: r, uplink_gbps: 1, colour: red}]\n"), "topology.racks[0].colour");
  EXPECT_EQ(key("two_tier: {racks: 2}\n"), "topology.two_tier.nodes_per_rack");
  EXPECT_EQ(key("two_tier: {racks: 100000, nodes_per_rack: 100000, nic_gbps: 1, uplink_gbps: 1}\n"),
            "topology.two_tier");             // 10^10 nodes
  EXPECT_EQ(key("racks: []\n"), "topology");  // defines no link
}

// The command line sets these past the file's checks: Validate holds them to the same ranges
// (their nanoseconds overflowed: every rank timed out at once, or the offline search never
// paused).
TEST(Config, RangesHoldForValuesSetInCode) {
  ServiceConfig cfg;
  cfg.registry.rank_timeout_ms = std::numeric_limits<int64_t>::max();
  EXPECT_THROW(cfg.Validate(), ConfigError);
  cfg.registry.rank_timeout_ms = 10'000;
  EXPECT_NO_THROW(cfg.Validate());
  cfg.controller.offline_interval_ms = std::numeric_limits<int64_t>::max();
  EXPECT_THROW(cfg.Validate(), ConfigError);
}

TEST(Config, HostPort) {
  EXPECT_EQ(ParseHostPort("http", "0.0.0.0:80"), (std::pair<std::string, int>{"0.0.0.0", 80}));
  EXPECT_THROW(ParseHostPort("http", ":80"), ConfigError);
  EXPECT_THROW(ParseHostPort("http", "host:"), ConfigError);
  EXPECT_THROW(ParseHostPort("http", "host:8o"), ConfigError);
}

}  // namespace
}  // namespace metronome::service
