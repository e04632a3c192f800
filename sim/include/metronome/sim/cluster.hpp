// The simulated cluster: racks of nodes, every node with an uplink to its rack switch (its NIC
// capacity) and every rack with an uplink to the spine. Links are numbered rack by rack: the
// rack's uplink first, then its nodes' uplinks, as controller::BuildTopology numbers the same
// cluster written as a topology file (`topology`): link and node indices are the planner's, and
// which links an all-reduce crosses is the planner's rule (LinksCrossed).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "metronome/controller/config.hpp"
#include "metronome/sim/scenario.hpp"

namespace metronome::planner {
class Topology;
}  // namespace metronome::planner

namespace metronome::sim {

inline constexpr double kBytesPerGbit = 1e9 / 8.0;

struct Cluster {
  struct Node {
    std::string name;
    int gpus = 0;
    std::string gpu;
    std::uint32_t rack = 0;
    std::uint32_t uplink = 0;  // link index
  };
  struct Rack {
    std::string name;
    std::uint32_t uplink = 0;  // link index
    std::vector<std::uint32_t> nodes;
  };
  struct Link {
    std::string name;
    double capacity_bytes_per_s = 0.0;  // bytes per second
  };

  std::vector<Node> nodes;
  std::vector<Rack> racks;
  std::vector<Link> links;
  std::unordered_map<std::string, std::uint32_t> node_index;
  double intra_node_bytes_per_s = 0.0;
  // The largest clock difference between two nodes (2 × noise.clock_skew_us): what a gate
  // release may be off by, so the least cushion a timetable should keep between windows.
  std::int64_t clock_error_ns = 0;
  // The cluster as a topology file would describe it (what the scheduler is configured with),
  // and the planner's topology built from it (controller::BuildTopology).
  controller::TopologyConfig topology;
  std::shared_ptr<const planner::Topology> network;

  // Throws std::invalid_argument when the planner's topology of the scenario's network numbers
  // its nodes or links differently (a node or link named twice).
  static Cluster FromScenario(const Scenario& scenario);

  // The links that an all-reduce among ranks on `nodes` crosses (planner::Topology::links_crossed:
  // none inside one node; the nodes' uplinks inside one rack; also the racks' uplinks across
  // racks). Sorted, unique.
  [[nodiscard]] std::vector<std::uint32_t> LinksCrossed(std::span<const std::uint32_t> nodes) const;
  [[nodiscard]] int TotalGpus() const;
};

// Ranks of one job per node.
struct Placement {
  std::vector<std::pair<std::uint32_t, int>> node_gpus;  // (node, ranks on it), node order
  [[nodiscard]] std::vector<std::uint32_t> Nodes() const;
  [[nodiscard]] bool Empty() const { return node_gpus.empty(); }
};

}  // namespace metronome::sim
