// Where a job's ranks go. Two placement strategies, as the evaluated policies use them:
//
// * Spread — the stock kube-scheduler's default: pods (gpus_per_pod GPUs each) are placed one at
//   a time on the node with the highest NodeResourcesLeastAllocated score, i.e. the largest
//   fraction of GPUs still free after the pod lands; ties are broken at random (seeded), as
//   kube-scheduler does among equal scores. It spreads jobs over many nodes and racks.
// * Pack — network-aware: the placement that crosses the fewest links. One node if any node has
//   room (best fit: the fullest node that fits); else one rack, on as few nodes as possible
//   (best fit among racks needing that few nodes); else as few racks as possible.
//
// Pinned jobs (scenario `nodes:`) get their ranks spread evenly over the listed nodes.
#pragma once

#include <optional>
#include <random>
#include <vector>

#include "metronome/sim/cluster.hpp"
#include "metronome/sim/scenario.hpp"

namespace metronome::sim {

// kScored: Metronome's placement (the extender's prioritize verb, docs/kubernetes.md). The
// candidates are Pack's: the best-fit node when the job fits in one (nothing to score: it crosses
// no link), else one candidate per rack that can hold it, else multi-rack ones (Pack's, then the
// same recipe started from each other rack, i.e. other sets of rack uplinks). Only those that
// cross no more links than Pack's own choice are kept (so it is at least as network-aware as
// Pack); the time scheduler scores them with the planner's what-if (the predicted
// priority-weighted slowdown of the job and of its neighbours) and the cheapest wins; ties keep
// Pack's order.
enum class PlacementKind { kSpread, kPack, kScored };

// free_gpus[n]: GPUs still free on node n. Returns nothing when the job does not fit now.
std::optional<Placement> PlaceJob(PlacementKind kind, const Cluster& cluster,
                                  const std::vector<int>& free_gpus, const JobSpec& job,
                                  std::mt19937_64& rng);

// Pack's candidates, its own choice first (empty: the job does not fit now).
std::vector<Placement> PackCandidates(const Cluster& cluster, const std::vector<int>& free_gpus,
                                      const JobSpec& job);

std::optional<Placement> PlacePinned(const Cluster& cluster, const std::vector<int>& free_gpus,
                                     const JobSpec& job);

}  // namespace metronome::sim
