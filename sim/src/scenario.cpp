#include "metronome/sim/scenario.hpp"

#include <yaml-cpp/yaml.h>

#include "metronome/common/yield.hpp"

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <unordered_map>

namespace metronome::sim {

std::string PriorityClass(int priority) {
  if (priority >= kPriorityHigh) return "high";
  if (priority >= kPriorityNormal) return "normal";
  return "low";
}

int TrafficClass(int priority) {
  if (priority >= kPriorityHigh) return 2;
  if (priority >= kPriorityNormal) return 1;
  return 0;
}

namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw ScenarioError(path + ": " + what);
}

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

void CheckKeys(const YAML::Node& map, const std::string& path,
               std::initializer_list<const char*> allowed) {
  if (!map.IsMap()) Fail(path.empty() ? "<top>" : path, "must be a map, got " + Describe(map));
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) {
        if (!list.empty()) list += ", ";
        list += a;
      }
      Fail(Join(path, key), "unknown key (allowed: " + list + ")");
    }
  }
}

double GetDouble(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) Fail(path, "must be a number, got " + Describe(n));
  double v = 0;
  if (!YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
    Fail(path, "must be a number, got " + Describe(n));
  }
  return v;
}

long long GetInt(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) Fail(path, "must be an integer, got " + Describe(n));
  long long v = 0;
  if (!YAML::convert<long long>::decode(n, v)) Fail(path, "must be an integer, got " + Describe(n));
  return v;
}

std::string GetString(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar() || n.Scalar().empty()) Fail(path, "must be a non-empty string");
  return n.Scalar();
}

double NonNegative(const YAML::Node& map, const std::string& path, const char* key, double dflt) {
  const YAML::Node n = map[key];
  if (!n) return dflt;
  const double v = GetDouble(n, Join(path, key));
  if (v < 0) Fail(Join(path, key), "must be >= 0 (got " + n.Scalar() + ")");
  return v;
}

double Positive(const YAML::Node& map, const std::string& path, const char* key) {
  const YAML::Node n = map[key];
  if (!n) Fail(Join(path, key), "required key is missing");
  const double v = GetDouble(n, Join(path, key));
  if (v <= 0) Fail(Join(path, key), "must be > 0 (got " + n.Scalar() + ")");
  return v;
}

int PositiveInt(const YAML::Node& map, const std::string& path, const char* key,
                std::optional<int> dflt = std::nullopt) {
  const YAML::Node n = map[key];
  if (!n) {
    if (dflt) return *dflt;
    Fail(Join(path, key), "required key is missing");
  }
  const long long v = GetInt(n, Join(path, key));
  if (v <= 0 || v > 100'000'000) {
    Fail(Join(path, key), "must be a positive integer (got " + n.Scalar() + ")");
  }
  return static_cast<int>(v);
}

int ParsePriority(const YAML::Node& n, const std::string& path) {
  if (!n) return kPriorityNormal;
  if (!n.IsScalar()) Fail(path, "must be high, normal, low or an integer");
  const std::string& s = n.Scalar();
  if (s == "high") return kPriorityHigh;
  if (s == "normal") return kPriorityNormal;
  if (s == "low") return kPriorityLow;
  long long v = 0;
  if (!YAML::convert<long long>::decode(n, v) || v < -1000 || v > 1000) {
    Fail(path, "must be high, normal, low or an integer in [-1000, 1000] (got '" + s + "')");
  }
  return static_cast<int>(v);
}

NodeSpec ParseNode(const YAML::Node& n, const std::string& path) {
  CheckKeys(n, path, {"name", "gpus", "gpu", "nic_gbps"});
  NodeSpec node;
  if (!n["name"]) Fail(Join(path, "name"), "required key is missing");
  node.name = GetString(n["name"], Join(path, "name"));
  node.gpus = PositiveInt(n, path, "gpus");
  node.gpu = n["gpu"] ? GetString(n["gpu"], Join(path, "gpu")) : std::string("A100");
  node.nic_gbps = Positive(n, path, "nic_gbps");
  return node;
}

RackSpec ParseRack(const YAML::Node& n, const std::string& path) {
  CheckKeys(n, path, {"name", "uplink_gbps", "nodes"});
  RackSpec rack;
  if (!n["name"]) Fail(Join(path, "name"), "required key is missing");
  rack.name = GetString(n["name"], Join(path, "name"));
  rack.uplink_gbps = Positive(n, path, "uplink_gbps");
  const YAML::Node nodes = n["nodes"];
  if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
    Fail(Join(path, "nodes"), "must be a non-empty list of nodes");
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    rack.nodes.push_back(ParseNode(nodes[i], Join(path, "nodes") + "[" + std::to_string(i) + "]"));
  }
  return rack;
}

JobSpec ParseJob(const YAML::Node& n, const std::string& path) {
  CheckKeys(n, path,
            {"name", "model", "compute_ms", "gradient_mb", "gpus", "gpus_per_pod", "iterations",
             "priority", "arrival_s", "nodes", "compute_jitter", "bucket_mb", "first_bucket_mb",
             "gpu", "chunk_kib"});
  JobSpec job;
  if (!n["name"]) Fail(Join(path, "name"), "required key is missing");
  job.name = GetString(n["name"], Join(path, "name"));
  if (n["model"]) job.model = GetString(n["model"], Join(path, "model"));
  if (n["gpu"]) job.gpu = GetString(n["gpu"], Join(path, "gpu"));
  if (n["compute_ms"]) job.compute_ms = Positive(n, path, "compute_ms");
  if (n["gradient_mb"]) job.gradient_mb = Positive(n, path, "gradient_mb");
  if (job.model.empty() && (job.compute_ms <= 0 || job.gradient_mb <= 0)) {
    Fail(path, "give either 'model' or both 'compute_ms' and 'gradient_mb'");
  }
  job.gpus = PositiveInt(n, path, "gpus");
  job.gpus_per_pod = PositiveInt(n, path, "gpus_per_pod", 1);
  job.iterations = PositiveInt(n, path, "iterations");
  job.priority = ParsePriority(n["priority"], Join(path, "priority"));
  job.arrival_s = NonNegative(n, path, "arrival_s", 0.0);
  if (n["compute_jitter"]) {
    job.compute_jitter = NonNegative(n, path, "compute_jitter", 0.0);
    if (*job.compute_jitter > 0.5) Fail(Join(path, "compute_jitter"), "must be <= 0.5");
  }
  // DDP bucket sizes matter to the testbed's trainer; the fluid model sends a phase as one
  // transfer, so they are checked and otherwise ignored.
  (void)NonNegative(n, path, "bucket_mb", 0.0);
  (void)NonNegative(n, path, "first_bucket_mb", 0.0);
  if (n["chunk_kib"]) {
    const int kib = PositiveInt(n, path, "chunk_kib");
    if (static_cast<std::uint64_t>(kib) << 10 < kMinChunkBytes) {
      Fail(Join(path, "chunk_kib"), "must be at least 64 (the shim's smallest part)");
    }
    job.chunk_bytes = static_cast<std::uint64_t>(kib) << 10;
  }
  if (const YAML::Node pin = n["nodes"]) {
    if (!pin.IsSequence() || pin.size() == 0) {
      Fail(Join(path, "nodes"), "must be a non-empty list of node names");
    }
    for (std::size_t i = 0; i < pin.size(); ++i) {
      job.nodes.push_back(GetString(pin[i], Join(path, "nodes") + "[" + std::to_string(i) + "]"));
    }
  }
  return job;
}

}  // namespace

Scenario ParseScenario(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(source + ": not valid YAML: " + e.what());
  }
  try {
    if (!root || root.IsNull()) throw ScenarioError(source + ": empty scenario");
    CheckKeys(root, "", {"seed", "noise", "topology", "jobs", "name", "description"});
    Scenario s;
    if (root["seed"]) {
      const long long seed = GetInt(root["seed"], "seed");
      if (seed < 0) Fail("seed", "must be >= 0");
      s.seed = static_cast<std::uint64_t>(seed);
    }
    if (const YAML::Node noise = root["noise"]) {
      CheckKeys(noise, "noise",
                {"compute_jitter", "clock_skew_us", "profile_error", "start_jitter_s",
                 "slow_phase_p", "slow_phase_factor"});
      s.noise.start_jitter_s = NonNegative(noise, "noise", "start_jitter_s", 0.0);
      s.noise.compute_jitter = NonNegative(noise, "noise", "compute_jitter", 0.0);
      s.noise.clock_skew_us = NonNegative(noise, "noise", "clock_skew_us", 0.0);
      s.noise.profile_error = NonNegative(noise, "noise", "profile_error", 0.0);
      if (s.noise.compute_jitter > 0.5) Fail("noise.compute_jitter", "must be <= 0.5");
      if (s.noise.profile_error > 0.5) Fail("noise.profile_error", "must be <= 0.5");
      s.noise.slow_phase_p = NonNegative(noise, "noise", "slow_phase_p", 0.0);
      if (s.noise.slow_phase_p > 1.0) Fail("noise.slow_phase_p", "must be <= 1");
      if (noise["slow_phase_factor"]) {
        s.noise.slow_phase_factor = Positive(noise, "noise", "slow_phase_factor");
        if (s.noise.slow_phase_factor < 1.0 || s.noise.slow_phase_factor > 10.0) {
          Fail("noise.slow_phase_factor", "must be in [1, 10]");
        }
      }
    }
    const YAML::Node topo = root["topology"];
    if (!topo) Fail("topology", "required key is missing");
    CheckKeys(topo, "topology", {"racks", "intra_node_gbps"});
    if (topo["intra_node_gbps"]) s.intra_node_gbps = Positive(topo, "topology", "intra_node_gbps");
    const YAML::Node racks = topo["racks"];
    if (!racks || !racks.IsSequence() || racks.size() == 0) {
      Fail("topology.racks", "must be a non-empty list of racks");
    }
    for (std::size_t i = 0; i < racks.size(); ++i) {
      s.racks.push_back(ParseRack(racks[i], "topology.racks[" + std::to_string(i) + "]"));
    }
    const YAML::Node jobs = root["jobs"];
    if (!jobs || !jobs.IsSequence() || jobs.size() == 0) {
      Fail("jobs", "must be a non-empty list of jobs");
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      s.jobs.push_back(ParseJob(jobs[i], "jobs[" + std::to_string(i) + "]"));
    }
    return s;
  } catch (const ScenarioError& e) {
    throw ScenarioError(source + ": " + e.what());
  } catch (const YAML::Exception& e) {
    throw ScenarioError(source + ": " + e.what());
  }
}

Scenario LoadScenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ScenarioError(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseScenario(ss.str(), path);
}

void ValidateScenario(const Scenario& s, const ModelLookup& models) {
  std::unordered_map<std::string, int> node_gpus;
  std::set<std::string> rack_names;
  int total_gpus = 0;
  for (std::size_t r = 0; r < s.racks.size(); ++r) {
    const std::string rp = "topology.racks[" + std::to_string(r) + "]";
    if (!rack_names.insert(s.racks[r].name).second) {
      Fail(rp + ".name", "duplicate rack name '" + s.racks[r].name + "'");
    }
    for (std::size_t i = 0; i < s.racks[r].nodes.size(); ++i) {
      const NodeSpec& n = s.racks[r].nodes[i];
      const std::string np = rp + ".nodes[" + std::to_string(i) + "]";
      if (!node_gpus.emplace(n.name, n.gpus).second) {
        Fail(np + ".name", "duplicate node name '" + n.name + "'");
      }
      total_gpus += n.gpus;
      if (models) {
        for (const JobSpec& j : s.jobs) {
          if (j.model.empty()) continue;
          try {
            (void)models(j.model, n.gpu);
          } catch (const std::exception&) {
            // Only an unknown GPU type is this node's fault; an unknown model is reported below.
            try {
              (void)models(j.model, "A100");
            } catch (const std::exception&) {
              continue;
            }
            Fail(np + ".gpu", "unknown GPU type '" + n.gpu + "' for model '" + j.model + "'");
          }
        }
      }
    }
  }
  std::set<std::string> job_names;
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const JobSpec& j = s.jobs[i];
    const std::string jp = "jobs[" + std::to_string(i) + "]";
    if (!job_names.insert(j.name).second) Fail(jp + ".name", "duplicate job name '" + j.name + "'");
    if (!j.gpu.empty()) {
      int typed = 0;
      for (const RackSpec& r : s.racks) {
        for (const NodeSpec& n : r.nodes) typed += n.gpu == j.gpu ? n.gpus : 0;
      }
      if (typed < j.gpus) {
        Fail(jp + ".gpu", "the cluster has " + std::to_string(typed) + " GPUs of type '" + j.gpu +
                              "', the job needs " + std::to_string(j.gpus));
      }
    }
    if (!j.gpu.empty()) {
      int typed = 0;
      for (const RackSpec& r : s.racks) {
        for (const NodeSpec& n : r.nodes) typed += n.gpu == j.gpu ? n.gpus : 0;
      }
      if (typed < j.gpus) {
        Fail(jp + ".gpu", "the cluster has " + std::to_string(typed) + " GPUs of type '" + j.gpu +
                              "', the job needs " + std::to_string(j.gpus));
      }
    }
    if (j.gpus > total_gpus) {
      Fail(jp + ".gpus", std::to_string(j.gpus) + " GPUs requested, the cluster has " +
                             std::to_string(total_gpus));
    }
    if (!j.model.empty() && (j.compute_ms <= 0 || j.gradient_mb <= 0)) {
      if (!models) {
        Fail(jp + ".model", "no model table in this build: give compute_ms and gradient_mb");
      }
      try {
        (void)models(j.model, "A100");
      } catch (const std::exception& e) {
        Fail(jp + ".model", e.what());  // names the model and the known ones
      }
    }
    if (!j.nodes.empty()) {
      int pinned_gpus = 0;
      std::set<std::string> seen;
      for (std::size_t k = 0; k < j.nodes.size(); ++k) {
        const auto it = node_gpus.find(j.nodes[k]);
        const std::string kp = jp + ".nodes[" + std::to_string(k) + "]";
        if (it == node_gpus.end()) Fail(kp, "unknown node '" + j.nodes[k] + "'");
        if (!seen.insert(j.nodes[k]).second) Fail(kp, "node '" + j.nodes[k] + "' listed twice");
        pinned_gpus += it->second;
      }
      if (pinned_gpus < j.gpus) {
        Fail(jp + ".nodes", "the pinned nodes have " + std::to_string(pinned_gpus) +
                                " GPUs, the job needs " + std::to_string(j.gpus));
      }
      if (static_cast<int>(j.nodes.size()) > j.gpus) {
        Fail(jp + ".nodes", "more pinned nodes than ranks");
      }
    }
  }
}

}  // namespace metronome::sim
