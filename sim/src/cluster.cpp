#include "metronome/sim/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "metronome/controller/topology.hpp"
#include "metronome/planner/topology.hpp"

namespace metronome::sim {

Cluster Cluster::FromScenario(const Scenario& s) {
  Cluster c;
  c.intra_node_bytes_per_s = s.intra_node_gbps * kBytesPerGbit;
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
  c.topology.unknown_nodes_link.clear();
  for (const Rack& rack : c.racks) {
    controller::TopologyConfig::RackSpec r;
    r.name = rack.name;
    r.uplink_bytes_per_s = c.links[rack.uplink].capacity_bytes_per_s;
    for (const std::uint32_t n : rack.nodes) {
      r.nodes.push_back({c.nodes[n].name, c.links[c.nodes[n].uplink].capacity_bytes_per_s});
    }
    c.topology.racks.push_back(std::move(r));
  }
  auto network = std::make_shared<planner::Topology>(controller::BuildTopology(c.topology));
  bool same = network->NodeCount() == c.nodes.size() && network->LinkCount() == c.links.size();
  for (std::uint32_t n = 0; same && n < c.nodes.size(); ++n) {
    same = network->NodeName(n) == c.nodes[n].name;
  }
  for (std::uint32_t l = 0; same && l < c.links.size(); ++l) {
    same = network->GetLink(l).name == c.links[l].name;
  }
  if (!same) {
    throw std::invalid_argument(
        "topology: every node and rack needs a distinct name and a positive uplink");
  }
  c.network = std::move(network);
  return c;
}

std::vector<std::uint32_t> Cluster::LinksCrossed(std::span<const std::uint32_t> ns) const {
  return network->LinksCrossed(ns);
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
