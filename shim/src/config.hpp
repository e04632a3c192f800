// The shim's settings, read once from the environment (METRONOME_*).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "log.hpp"
#include "metronome/common/clock_sync.hpp"
#include "metronome/common/timetable.hpp"

namespace metronome::shim {

enum class Mode : int { kOff = 0, kObserve = 1, kEnforce = 2 };
enum class GateKind : int { kAuto = 0, kDevice = 1, kHost = 2 };

struct Config {
  Mode mode = Mode::kEnforce;                      // METRONOME_MODE off|observe|enforce
  GateKind gate = GateKind::kAuto;                 // METRONOME_GATE auto|device|host
  int64_t max_wait_ns = kDefaultMaxWaitCapNs;      // METRONOME_MAX_WAIT_MS (caps the timetable's)
  std::string scheduler = "tcp://127.0.0.1:7411";  // METRONOME_SCHEDULER
  std::string job;                                 // METRONOME_JOB ("" = hash of the unique id)
  std::string node;                                // NODE_NAME, else gethostname()
  // The pod, from the downward API (METRONOME_NAMESPACE, METRONOME_POD, METRONOME_POD_UID): sent
  // in the hello, where a scheduler with the Kubernetes integration checks them.
  std::string pod_namespace, pod_name, pod_uid;
  int32_t priority = 1;                    // METRONOME_PRIORITY high|normal|low|<int>
  LogLevel log_level = LogLevel::kInfo;    // METRONOME_LOG off|error|warn|info|debug
  int64_t silence_ns = kDefaultSilenceNs;  // METRONOME_FAILOPEN_MS: scheduler silence bound
  std::string nccl_library;                // METRONOME_NCCL_LIBRARY
  // METRONOME_NODE_SHARE on|off: the ranks of a job on one node share one registration with the
  // scheduler (node_share.hpp); METRONOME_SHARE_DIR: where their segment lives.
  bool node_share = true;
  std::string share_dir = "/dev/shm";
  std::string curve_server_key;  // METRONOME_CURVE_SERVERKEY: the scheduler's Z85 CURVE public key
  // METRONOME_CHUNK_KIB: in enforce mode, element-wise collectives larger than this are issued in
  // parts, each through the gate (common/yield.hpp, ChunkParts). It must be the same on every
  // rank of the job. 0 (the default): never split; below 64 KiB: raised to it.
  uint64_t chunk_bytes = 0;
  // METRONOME_TRAFFIC_CLASS "high=N,normal=N,low=N" (any of them, 0-255): the trafficClass of
  // communicators created with a config that leaves it undefined, by TrafficClassIndex of the
  // priority; -1 (the default): NCCL's own.
  int traffic_class[3] = {-1, -1, -1};
  std::string warnings;  // what could not be parsed ("" = all fine), logged once at start
};

// Parses the settings from `get` (getenv in production; a map in tests). Never throws for bad
// values: they keep their default and are named in Config::warnings.
Config ParseConfig(const std::function<const char*(const char*)>& get);
Config ConfigFromEnv();

// 0 low (priority <= 0), 1 normal (1), 2 high (>= 2): METRONOME_PRIORITY's classes.
constexpr int TrafficClassIndex(int32_t priority) {
  return priority <= 0 ? 0 : (priority == 1 ? 1 : 2);
}

const char* ModeName(Mode m);
const char* GateKindName(GateKind g);

}  // namespace metronome::shim
