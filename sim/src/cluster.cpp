#include "metronome/sim/cluster.hpp"

#include <algorithm>
#include <cmath>

namespace metronome::sim {

Cluster Cluster::FromScenario(const Scenario& s) {
  Cluster c;
  c.intra_node_Bps = s.intra_node_gbps * kBytesPerGbit;
  c.clock_error_ns = std::llround(2.0 * s.noise.clock_skew_us * 1e3);
  for (const RackSpec& rs : s.racks) {
    Rack rack;
    rack.name = rs.name;
    rack.uplink = static_cast<std::uint32_t>(c.links.size());
    c.links.push_back({rs.name + "/up", rs.uplink_gbps * kBytesPerGbit});
    const auto rack_id = static_cast<std::uint32_t>(c.racks.size());
    for (const NodeSpec& ns : rs.nodes) {
      Node node;
      node.name = ns.name;
      node.gpus = ns.gpus;
      node.gpu = ns.gpu;
      node.rack = rack_id;
      node.uplink = static_cast<std::uint32_t>(c.links.size());
      c.links.push_back({ns.name + "/up", ns.nic_gbps * kBytesPerGbit});
      const auto id = static_cast<std::uint32_t>(c.nodes.size());
      c.node_index.emplace(ns.name, id);
      rack.nodes.push_back(id);
      c.nodes.push_back(std::move(node));
    }
    c.racks.push_back(std::move(rack));
  }
  return c;
}

std::vector<std::uint32_t> Cluster::LinksCrossed(std::span<const std::uint32_t> ns) const {
  std::vector<std::uint32_t> out;
  if (ns.empty()) return out;
  const bool one_node =
      std::all_of(ns.begin(), ns.end(), [&](std::uint32_t n) { return n == ns.front(); });
  if (one_node) return out;
  const std::uint32_t rack0 = nodes[ns.front()].rack;
  const bool one_rack =
      std::all_of(ns.begin(), ns.end(), [&](std::uint32_t n) { return nodes[n].rack == rack0; });
  for (std::uint32_t n : ns) {
    out.push_back(nodes[n].uplink);
    if (!one_rack) out.push_back(racks[nodes[n].rack].uplink);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int Cluster::TotalGpus() const {
  int total = 0;
  for (const Node& n : nodes) total += n.gpus;
  return total;
}

std::vector<std::uint32_t> Placement::Nodes() const {
  std::vector<std::uint32_t> out;
  out.reserve(node_gpus.size());
  for (const auto& [node, gpus] : node_gpus) out.push_back(node);
  return out;
}

}  // namespace metronome::sim
