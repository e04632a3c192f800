// The planner's topology from the controller's topology settings: explicit links, a generated
// two-tier tree, racks with their uplinks ("<rack>/up") and nodes with theirs ("<node>/up"), in
// that order. The planning adapter plans on it; the kube-scheduler extender starts its own from
// it and adds the nodes that only labels place.
#pragma once

#include "metronome/controller/config.hpp"
#include "metronome/planner/topology.hpp"

namespace metronome::controller {

planner::Topology BuildTopology(const TopologyConfig& config);

}  // namespace metronome::controller
