#include "metronome/controller/topology.hpp"

#include <string>
#include <unordered_set>

namespace metronome::controller {

namespace pl = metronome::planner;

pl::Topology BuildTopology(const TopologyConfig& cfg) {
  pl::Topology t;
  if (cfg.two_tier) {
    t = pl::Topology::two_tier({cfg.two_tier->racks, cfg.two_tier->nodes_per_rack,
                                cfg.two_tier->nic_bytes_per_s, cfg.two_tier->uplink_bytes_per_s});
  }
  for (const auto& l : cfg.links) t.add_link(l.name, l.capacity_bytes_per_s);
  std::unordered_set<std::string> nodes;
  for (pl::NodeId n = 0; n < t.node_count(); ++n) nodes.insert(t.node_name(n));
  for (const auto& r : cfg.racks) {
    std::optional<pl::LinkId> up;
    if (r.uplink_bytes_per_s > 0) up = t.add_link(r.name + "/up", r.uplink_bytes_per_s);
    const pl::RackId rack = t.add_rack(r.name, up);
    for (const auto& n : r.nodes) {
      if (!nodes.insert(n.name).second) continue;  // named twice: the first place stands
      std::optional<pl::LinkId> nic;
      if (n.nic_bytes_per_s > 0) nic = t.add_link(n.name + "/up", n.nic_bytes_per_s);
      t.add_node(n.name, rack, nic);
    }
  }
  return t;
}

}  // namespace metronome::controller
