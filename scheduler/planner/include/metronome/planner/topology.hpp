// The network as the planner sees it: nodes, links with a capacity, and which links a set of
// nodes crosses when its ranks talk to each other.
//
// A link is anything whose bandwidth is shared: a node's uplink, a rack's uplink, or an explicit
// link (a spine, a WAN hop) that jobs name directly. The two-tier builder makes the usual tree:
// every node has an uplink to its rack switch, every rack an uplink to the spine.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace metronome::planner {

using NodeId = std::uint32_t;
using LinkId = std::uint32_t;
using RackId = std::uint32_t;

struct Link {
  std::string name;
  double capacity_bps = 0.0;  // B_l, bytes per second
};

struct TwoTierSpec {
  std::uint32_t racks = 0;
  std::uint32_t nodes_per_rack = 0;
  double node_uplink_bps = 0.0;
  double rack_uplink_bps = 0.0;
};

class Topology {
 public:
  // Builds racks × nodes_per_rack nodes; node k of rack r is named "r<r>n<k>", its uplink
  // "r<r>n<k>/up", the rack's uplink "r<r>/up". Node ids run rack by rack.
  static Topology TwoTier(const TwoTierSpec& spec);

  LinkId AddLink(std::string name, double capacity_bps);
  // A rack, optionally with an uplink (a rack without one never counts as crossed).
  RackId AddRack(std::string name, std::optional<LinkId> uplink);
  // A node in a rack (or none), optionally with an uplink.
  NodeId AddNode(std::string name, std::optional<RackId> rack, std::optional<LinkId> uplink);

  // The links that traffic among `nodes` crosses: none when all ranks share one node; the
  // nodes' uplinks when they share one rack; also the racks' uplinks when they span racks.
  // Sorted, without duplicates.
  [[nodiscard]] std::vector<LinkId> LinksCrossed(std::span<const NodeId> nodes) const;

  [[nodiscard]] const Link& GetLink(LinkId id) const { return links_.at(id); }
  [[nodiscard]] std::size_t LinkCount() const { return links_.size(); }
  [[nodiscard]] std::size_t NodeCount() const { return nodes_.size(); }
  [[nodiscard]] std::size_t RackCount() const { return racks_.size(); }
  [[nodiscard]] std::optional<RackId> RackOf(NodeId node) const { return nodes_.at(node).rack; }
  [[nodiscard]] const std::string& NodeName(NodeId node) const { return nodes_.at(node).name; }
  [[nodiscard]] std::optional<LinkId> NodeUplink(NodeId node) const {
    return nodes_.at(node).uplink;
  }
  [[nodiscard]] const std::string& RackName(RackId rack) const { return racks_.at(rack).name; }

 private:
  struct Node {
    std::string name;
    std::optional<RackId> rack;
    std::optional<LinkId> uplink;
  };
  struct Rack {
    std::string name;
    std::optional<LinkId> uplink;
  };
  std::vector<Link> links_;
  std::vector<Node> nodes_;
  std::vector<Rack> racks_;
};

}  // namespace metronome::planner
