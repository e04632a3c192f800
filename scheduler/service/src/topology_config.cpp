// The topology file: the scenario format shared with the simulator and the testbed.
#include <yaml-cpp/yaml.h>

#include <set>

#include "metronome/service/config.hpp"
#include "yaml_util.hpp"

namespace metronome::service {

using yaml_util::Child;
using yaml_util::Index;
using yaml_util::ReadDouble;
using yaml_util::ReadInt;
using yaml_util::ReadString;

namespace {

constexpr double kMaxRate = 1e15;  // bits/s; anything above is a typo
constexpr uint64_t kMaxTwoTierNodes = 1'000'000;

// `<what>_gbps` or `<what>_mbps` → bytes per second; 0 when neither is present and !required.
double ReadRate(const YAML::Node& n, const std::string& key, const std::string& what,
                bool required) {
  const bool g = static_cast<bool>(n[what + "_gbps"]);
  const bool m = static_cast<bool>(n[what + "_mbps"]);
  if (g && m) throw ConfigError(Child(key, what + "_gbps"), "give either _gbps or _mbps, not both");
  if (!g && !m) {
    if (required) throw ConfigError(Child(key, what + "_gbps"), "missing (or " + what + "_mbps)");
    return 0.0;
  }
  const std::string k = Child(key, what + (g ? "_gbps" : "_mbps"));
  const double v = ReadDouble(n[what + (g ? "_gbps" : "_mbps")], k, 0.0, kMaxRate);
  if (!(v > 0.0)) throw ConfigError(k, "must be positive");
  return v * (g ? 1e9 : 1e6) / 8.0;
}

void CheckKeys(const YAML::Node& n, const std::string& key, const std::set<std::string>& known) {
  if (!n.IsMap()) throw ConfigError(key, "must be a mapping");
  for (const auto& kv : n) {
    const std::string name = kv.first.as<std::string>("");
    if (!known.contains(name)) throw ConfigError(Child(key, name), "unknown key");
  }
}

}  // namespace

TopologyConfig ParseTopologyYaml(const std::string& yaml_text, const std::string& key_prefix) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(key_prefix, std::string("is not valid YAML: ") + e.what());
  }
  std::string key = key_prefix;
  // A scenario file holds the topology under `topology:` beside other sections.
  if (doc.IsMap() && doc["topology"]) {
    doc = doc["topology"];
    key = Child(key_prefix, "topology");
  }
  CheckKeys(doc, key, {"links", "racks", "two_tier", "unknown_nodes_link"});
  TopologyConfig t;
  t.unknown_nodes_link.clear();
  std::set<std::string> link_names, node_names, rack_names;
  if (const auto tt = doc["two_tier"]) {
    const std::string k = Child(key, "two_tier");
    CheckKeys(tt, k,
              {"racks", "nodes_per_rack", "nic_gbps", "nic_mbps", "uplink_gbps", "uplink_mbps"});
    if (!tt["racks"]) throw ConfigError(Child(k, "racks"), "missing");
    if (!tt["nodes_per_rack"]) throw ConfigError(Child(k, "nodes_per_rack"), "missing");
    TopologyConfig::TwoTier spec;
    spec.racks = static_cast<uint32_t>(ReadInt(tt["racks"], Child(k, "racks"), 1, 100'000));
    spec.nodes_per_rack = static_cast<uint32_t>(
        ReadInt(tt["nodes_per_rack"], Child(k, "nodes_per_rack"), 1, 100'000));
    // Each bounded alone, their product is not: 10^10 nodes would exhaust memory at start.
    if (uint64_t{spec.racks} * spec.nodes_per_rack > kMaxTwoTierNodes) {
      throw ConfigError(k, "racks x nodes_per_rack is over 1000000 nodes");
    }
    spec.nic_bytes_per_s = ReadRate(tt, k, "nic", true);
    spec.uplink_bytes_per_s = ReadRate(tt, k, "uplink", true);
    t.two_tier = spec;
    for (uint32_t r = 0; r < spec.racks; ++r) {
      // Appended rather than "r" + to_string(r): GCC 12 warns falsely (-Wrestrict) on the latter.
      std::string rack = "r";
      rack += std::to_string(r);
      rack_names.insert(rack);
      link_names.insert(rack + "/up");
      for (uint32_t n = 0; n < spec.nodes_per_rack; ++n) {
        const std::string name = rack + "n" + std::to_string(n);
        node_names.insert(name);
        link_names.insert(name + "/up");
      }
    }
  }
  if (const auto links = doc["links"]) {
    const std::string k = Child(key, "links");
    if (!links.IsSequence()) throw ConfigError(k, "must be a list");
    for (size_t i = 0; i < links.size(); ++i) {
      const std::string lk = Index(k, i);
      CheckKeys(links[i], lk, {"name", "capacity_gbps", "capacity_mbps"});
      if (!links[i]["name"]) throw ConfigError(Child(lk, "name"), "missing");
      TopologyConfig::LinkSpec l;
      l.name = ReadString(links[i]["name"], Child(lk, "name"));
      if (!link_names.insert(l.name).second) {
        throw ConfigError(Child(lk, "name"), "duplicate link name '" + l.name + "'");
      }
      l.capacity_bytes_per_s = ReadRate(links[i], lk, "capacity", true);
      t.links.push_back(l);
    }
  }
  if (const auto racks = doc["racks"]) {
    const std::string k = Child(key, "racks");
    if (!racks.IsSequence()) throw ConfigError(k, "must be a list");
    for (size_t i = 0; i < racks.size(); ++i) {
      const std::string rk = Index(k, i);
      CheckKeys(racks[i], rk, {"name", "uplink_gbps", "uplink_mbps", "nodes"});
      if (!racks[i]["name"]) throw ConfigError(Child(rk, "name"), "missing");
      TopologyConfig::RackSpec r;
      r.name = ReadString(racks[i]["name"], Child(rk, "name"));
      if (!rack_names.insert(r.name).second) {
        throw ConfigError(Child(rk, "name"), "duplicate rack name '" + r.name + "'");
      }
      r.uplink_bytes_per_s = ReadRate(racks[i], rk, "uplink", false);
      if (r.uplink_bytes_per_s > 0 && !link_names.insert(r.name + "/up").second) {
        throw ConfigError(Child(rk, "name"), "link '" + r.name + "/up' already exists");
      }
      const auto nodes = racks[i]["nodes"];
      if (nodes) {
        const std::string nk = Child(rk, "nodes");
        if (!nodes.IsSequence()) throw ConfigError(nk, "must be a list");
        for (size_t j = 0; j < nodes.size(); ++j) {
          const std::string nodek = Index(nk, j);
          CheckKeys(nodes[j], nodek, {"name", "nic_gbps", "nic_mbps", "gpus", "gpu"});
          if (!nodes[j]["name"]) throw ConfigError(Child(nodek, "name"), "missing");
          TopologyConfig::NodeSpec n;
          n.name = ReadString(nodes[j]["name"], Child(nodek, "name"));
          if (!node_names.insert(n.name).second) {
            throw ConfigError(Child(nodek, "name"), "duplicate node name '" + n.name + "'");
          }
          n.nic_bytes_per_s = ReadRate(nodes[j], nodek, "nic", false);
          if (n.nic_bytes_per_s > 0 && !link_names.insert(n.name + "/up").second) {
            throw ConfigError(Child(nodek, "name"), "link '" + n.name + "/up' already exists");
          }
          r.nodes.push_back(n);
        }
      }
      t.racks.push_back(r);
    }
  }
  if (const auto u = doc["unknown_nodes_link"]) {
    const std::string k = Child(key, "unknown_nodes_link");
    t.unknown_nodes_link = u.IsNull() ? "" : ReadString(u, k);
    if (!t.unknown_nodes_link.empty() && !link_names.contains(t.unknown_nodes_link)) {
      throw ConfigError(k, "names no link of the topology: '" + t.unknown_nodes_link + "'");
    }
  }
  if (link_names.empty()) throw ConfigError(key, "defines no link");
  return t;
}

TopologyConfig LoadTopologyFile(const std::string& path) {
  std::string text;
  if (!yaml_util::ReadWholeFile(path, text)) {
    throw ConfigError("topology", "cannot read file '" + path + "'");
  }
  try {
    return ParseTopologyYaml(text, "topology");
  } catch (const ConfigError& e) {
    throw ConfigError(e.Key(), e.Reason() + " (in " + path + ")");
  }
}

}  // namespace metronome::service
