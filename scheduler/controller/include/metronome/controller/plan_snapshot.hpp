// The controller's plan in the planner's own terms, for the one reader besides the adapter that
// works in them: the kube-scheduler extender, which scores a placement with the planner's
// what-if against the jobs and the plan the service runs, not against a copy rebuilt from the
// timetables. This header includes planner headers; a target that includes it links
// metronome::planner (the service and the simulator never do: they read PlanSummary).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "metronome/controller/config.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"
#include "metronome/planner/topology.hpp"

namespace metronome::controller {

// What the adapter planned, as of one PlanSummary: each job as the planner was given it (ids
// are the registry's, node and link ids those of BuildTopology(the configured topology)) and
// the planner's plan (offsets from PlanSummary::epoch_ns), shared with the adapter, which
// evaluates it once per change; never null, never modified.
struct PlanSnapshot {
  std::vector<planner::Job> jobs;
  std::shared_ptr<const planner::Plan> plan;
};

// Where a job's node names are in a topology, and the link behind which unknown nodes sit.
struct NodeIndex {
  std::unordered_map<std::string, planner::NodeId> ids;
  std::optional<planner::LinkId> unknown_link;
};
[[nodiscard]] NodeIndex IndexNodes(const planner::Topology& topology,
                                   const std::string& unknown_nodes_link);

// What a saturating job's window is made of: the wire time of its bytes at its bottleneck and
// the margin over it that the conversion gave (the configured one at most). wire_ns 0: the job
// does not saturate its links (its window is its own pace).
struct WireWindow {
  double wire_ns = 0.0;
  double margin = 0.0;
};

// A registry job (its measured or declared profile) as the planner's input: node names to ids
// (unknown ones to the catch-all link), the profile to (P, c, β, σ). The one conversion, used by
// the adapter for every job it plans and by the extender for jobs not planned yet. `wire`, where
// given, receives what its window is made of.
[[nodiscard]] planner::Job ToPlannerJob(const PlanJob& job, const planner::Topology& topology,
                                        const NodeIndex& nodes, const PlanningConfig& config,
                                        WireWindow* wire = nullptr);
// Its profile part alone: a profile of a job of `ranks` ranks on links whose narrowest carries
// `bottleneck_bps` (0: the job crosses no link), for a caller that has the links already.
[[nodiscard]] planner::JobProfile ToPlannerProfile(const MeasuredProfile& profile,
                                                   std::size_t ranks, double bottleneck_bps,
                                                   const PlanningConfig& config,
                                                   WireWindow* wire = nullptr);
// The narrowest capacity among `links` (0: none).
[[nodiscard]] double Bottleneck(const planner::Topology& topology,
                                std::span<const planner::LinkId> links);

}  // namespace metronome::controller
