#include "metronome/controller/topology.hpp"

#include <string>
#include <unordered_set>

namespace metronome::controller {

namespace pl = metronome::planner;

pl::Topology BuildTopology(const TopologyConfig& cfg) {
  pl::Topology t;
  if (cfg.two_tier) {
    t = pl::Topology::TwoTier({cfg.two_tier->racks, cfg.two_tier->nodes_per_rack,
                               cfg.two_tier->nic_bytes_per_s, cfg.two_tier->uplink_bytes_per_s});
  }
  for (const auto& l : cfg.links) t.AddLink(l.name, l.capacity_bytes_per_s);
  std::unordered_set<std::string> nodes;
  for (pl::NodeId n = 0; n < t.NodeCount(); ++n) nodes.insert(t.NodeName(n));
  for (const auto& r : cfg.racks) {
    std::optional<pl::LinkId> up;
    if (r.uplink_bytes_per_s > 0) up = t.AddLink(r.name + "/up", r.uplink_bytes_per_s);
    const pl::RackId rack = t.AddRack(r.name, up);
    for (const auto& n : r.nodes) {
      if (!nodes.insert(n.name).second) continue;  // named twice: the first place stands
      std::optional<pl::LinkId> nic;
      if (n.nic_bytes_per_s > 0) nic = t.AddLink(n.name + "/up", n.nic_bytes_per_s);
      t.AddNode(n.name, rack, nic);
    }
  }
  return t;
}

}  // namespace metronome::controller
