// Topology: nodes, racks, links, and the links a set of nodes crosses.
#include "metronome/planner/topology.hpp"

#include <algorithm>
#include <stdexcept>

namespace metronome::planner {

Topology Topology::TwoTier(const TwoTierSpec& spec) {
  Topology t;
  for (std::uint32_t r = 0; r < spec.racks; ++r) {
    // (Built with append: GCC 12 warns falsely on chained operator+ of short strings.)
    std::string rack = "r";
    rack.append(std::to_string(r));
    const LinkId rack_up = t.AddLink(rack + "/up", spec.rack_uplink_bps);
    const RackId rid = t.AddRack(rack, rack_up);
    for (std::uint32_t n = 0; n < spec.nodes_per_rack; ++n) {
      std::string node = rack;
      node.append("n").append(std::to_string(n));
      const LinkId up = t.AddLink(node + "/up", spec.node_uplink_bps);
      t.AddNode(node, rid, up);
    }
  }
  return t;
}

LinkId Topology::AddLink(std::string name, double capacity_bps) {
  links_.push_back(Link{std::move(name), capacity_bps});
  return static_cast<LinkId>(links_.size() - 1);
}

RackId Topology::AddRack(std::string name, std::optional<LinkId> uplink) {
  if (uplink && *uplink >= links_.size()) throw std::out_of_range("add_rack: unknown link");
  racks_.push_back(Rack{std::move(name), uplink});
  return static_cast<RackId>(racks_.size() - 1);
}

NodeId Topology::AddNode(std::string name, std::optional<RackId> rack,
                         std::optional<LinkId> uplink) {
  if (rack && *rack >= racks_.size()) throw std::out_of_range("add_node: unknown rack");
  if (uplink && *uplink >= links_.size()) throw std::out_of_range("add_node: unknown link");
  nodes_.push_back(Node{std::move(name), rack, uplink});
  return static_cast<NodeId>(nodes_.size() - 1);
}

std::vector<LinkId> Topology::LinksCrossed(std::span<const NodeId> nodes) const {
  std::vector<NodeId> distinct(nodes.begin(), nodes.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<LinkId> out;
  if (distinct.size() < 2) return out;  // all ranks on one node: no network link
  std::vector<RackId> racks;
  for (const NodeId n : distinct) {
    const Node& node = nodes_.at(n);
    if (node.uplink) out.push_back(*node.uplink);
    if (node.rack) racks.push_back(*node.rack);
  }
  std::sort(racks.begin(), racks.end());
  racks.erase(std::unique(racks.begin(), racks.end()), racks.end());
  if (racks.size() > 1) {
    for (const RackId r : racks) {
      if (racks_[r].uplink) out.push_back(*racks_[r].uplink);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace metronome::planner
