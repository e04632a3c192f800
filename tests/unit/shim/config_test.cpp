#include "config.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "metronome/common/yield.hpp"

namespace metronome::shim {
namespace {

Config Parse(const std::map<std::string, std::string>& env) {
  return ParseConfig([&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ShimConfig, Defaults) {
  const Config c = Parse({{"NODE_NAME", "n1"}});
  EXPECT_EQ(c.mode, Mode::kEnforce);
  EXPECT_EQ(c.gate, GateKind::kAuto);
  EXPECT_EQ(c.scheduler, "tcp://127.0.0.1:7411");
  EXPECT_EQ(c.priority, 1);
  EXPECT_EQ(c.node, "n1");
  EXPECT_EQ(c.max_wait_ns, 1'000'000'000);
  EXPECT_TRUE(c.pod_namespace.empty() && c.pod_name.empty() && c.pod_uid.empty());
  EXPECT_TRUE(c.node_share);
  EXPECT_EQ(c.share_dir, "/dev/shm");
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ShimConfig, NodeSharing) {
  Config c = Parse({{"METRONOME_NODE_SHARE", "off"}, {"METRONOME_SHARE_DIR", "/run/metronome"}});
  EXPECT_FALSE(c.node_share);
  EXPECT_EQ(c.share_dir, "/run/metronome");
  EXPECT_TRUE(c.warnings.empty());
  c = Parse({{"METRONOME_NODE_SHARE", "0"}});
  EXPECT_FALSE(c.node_share);
  c = Parse({{"METRONOME_NODE_SHARE", "1"}});
  EXPECT_TRUE(c.node_share);
  // A value it does not know, a relative folder: defaults kept, both named.
  c = Parse({{"METRONOME_NODE_SHARE", "maybe"}, {"METRONOME_SHARE_DIR", "shm"}});
  EXPECT_TRUE(c.node_share);
  EXPECT_EQ(c.share_dir, "/dev/shm");
  EXPECT_NE(c.warnings.find("METRONOME_NODE_SHARE"), std::string::npos) << c.warnings;
  EXPECT_NE(c.warnings.find("METRONOME_SHARE_DIR"), std::string::npos) << c.warnings;
}

// The downward API's pod identity, which the hello carries to the scheduler.
TEST(ShimConfig, PodIdentity) {
  const Config c = Parse({{"METRONOME_NAMESPACE", "team-a"},
                          {"METRONOME_POD", "bert-0"},
                          {"METRONOME_POD_UID", "0d3c5a2e-7f1b-4c4e-9a51-3f0e6d2b8c11"}});
  EXPECT_EQ(c.pod_namespace, "team-a");
  EXPECT_EQ(c.pod_name, "bert-0");
  EXPECT_EQ(c.pod_uid, "0d3c5a2e-7f1b-4c4e-9a51-3f0e6d2b8c11");
  // Kept whole: the encoder bounds the hello's strings (Protocol.EncoderCutsOverlong...).
  EXPECT_EQ(Parse({{"METRONOME_POD", std::string(300, 'p')}}).pod_name, std::string(300, 'p'));
}

TEST(ShimConfig, AllSettings) {
  const Config c = Parse({{"METRONOME_MODE", "observe"},
                          {"METRONOME_GATE", "host"},
                          {"METRONOME_MAX_WAIT_MS", "25"},
                          {"METRONOME_SCHEDULER", "tcp://10.0.0.1:9"},
                          {"METRONOME_JOB", "bert"},
                          {"METRONOME_PRIORITY", "high"},
                          {"METRONOME_LOG", "debug"},
                          {"METRONOME_FAILOPEN_MS", "800"}});
  EXPECT_EQ(c.mode, Mode::kObserve);
  EXPECT_EQ(c.gate, GateKind::kHost);
  EXPECT_EQ(c.max_wait_ns, 25'000'000);
  EXPECT_EQ(c.scheduler, "tcp://10.0.0.1:9");
  EXPECT_EQ(c.job, "bert");
  EXPECT_EQ(c.priority, 2);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.silence_ns, 800'000'000);
  EXPECT_FALSE(c.node.empty());  // from gethostname
}

TEST(ShimConfig, PriorityAsInteger) {
  EXPECT_EQ(Parse({{"METRONOME_PRIORITY", "low"}}).priority, 0);
  EXPECT_EQ(Parse({{"METRONOME_PRIORITY", "7"}}).priority, 7);
  EXPECT_EQ(Parse({{"METRONOME_PRIORITY", "-3"}}).priority, -3);
}

TEST(ShimConfig, BadValuesKeepDefaultsAndAreNamed) {
  const Config c = Parse({{"METRONOME_MODE", "fast"},
                          {"METRONOME_GATE", "gpu"},
                          {"METRONOME_MAX_WAIT_MS", "-1"},
                          {"METRONOME_PRIORITY", "urgent"},
                          {"METRONOME_FAILOPEN_MS", "12abc"}});
  EXPECT_EQ(c.mode, Mode::kEnforce);
  EXPECT_EQ(c.gate, GateKind::kAuto);
  EXPECT_EQ(c.max_wait_ns, 1'000'000'000);
  EXPECT_EQ(c.priority, 1);
  for (const char* name : {"METRONOME_MODE", "METRONOME_GATE", "METRONOME_MAX_WAIT_MS",
                           "METRONOME_PRIORITY", "METRONOME_FAILOPEN_MS"}) {
    EXPECT_NE(c.warnings.find(name), std::string::npos) << name;
  }
}

TEST(ShimConfig, ChunkSizeInKibibytesRaisedToTheFloor) {
  EXPECT_EQ(Parse({}).chunk_bytes, 0u) << "not split by default";
  EXPECT_EQ(Parse({{"METRONOME_CHUNK_KIB", "2048"}}).chunk_bytes, 2u << 20);
  const Config small = Parse({{"METRONOME_CHUNK_KIB", "8"}});
  EXPECT_EQ(small.chunk_bytes, kMinChunkBytes);
  EXPECT_NE(small.warnings.find("METRONOME_CHUNK_KIB='8' raised to 64"), std::string::npos);
  for (const char* bad : {"-1", "2M", "9999999999999"}) {
    const Config c = Parse({{"METRONOME_CHUNK_KIB", bad}});
    EXPECT_EQ(c.chunk_bytes, 0u) << bad;
    EXPECT_NE(c.warnings.find("METRONOME_CHUNK_KIB"), std::string::npos) << bad;
  }
}

TEST(ShimConfig, CurveServerKeyAsAKeyFileHoldsIt) {
  const std::string key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  EXPECT_EQ(Parse({{"METRONOME_CURVE_SERVERKEY", key}}).curve_server_key, key);
  EXPECT_EQ(Parse({{"METRONOME_CURVE_SERVERKEY", key + "\n"}}).curve_server_key, key);
  const Config bad = Parse({{"METRONOME_CURVE_SERVERKEY", key + "x"}});
  EXPECT_TRUE(bad.curve_server_key.empty());
  EXPECT_NE(bad.warnings.find("METRONOME_CURVE_SERVERKEY"), std::string::npos);
}

TEST(ShimConfig, OffMode) {
  EXPECT_EQ(Parse({{"METRONOME_MODE", "off"}}).mode, Mode::kOff);
}

TEST(ShimConfig, TrafficClassMap) {
  Config none = Parse({});
  for (int tc : none.traffic_class) EXPECT_EQ(tc, -1);  // NCCL's own by default
  Config c = Parse({{"METRONOME_TRAFFIC_CLASS", "high=46,low=10"}});
  EXPECT_EQ(c.traffic_class[TrafficClassIndex(0)], 10);
  EXPECT_EQ(c.traffic_class[TrafficClassIndex(1)], -1);
  EXPECT_EQ(c.traffic_class[TrafficClassIndex(2)], 46);
  EXPECT_EQ(c.traffic_class[TrafficClassIndex(7)], 46);
  EXPECT_EQ(c.traffic_class[TrafficClassIndex(-3)], 10);
  EXPECT_TRUE(c.warnings.empty());
  for (const char* bad : {"high=256", "high", "urgent=3", "high=1,,low=2", "high=-1", "high=x"}) {
    Config b = Parse({{"METRONOME_TRAFFIC_CLASS", bad}});
    for (int tc : b.traffic_class) EXPECT_EQ(tc, -1) << bad;  // all or nothing
    EXPECT_NE(b.warnings.find("METRONOME_TRAFFIC_CLASS"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace metronome::shim
