// From Kubernetes objects to the parts of ClusterState that the cluster, not the shims, knows:
// node labels (Nodes), declared and measured profiles (TrafficProfiles) and where the pods of
// Metronome jobs are bound (Pods). Inputs are the objects of kube::Cache::Objects(), so that the
// scheduler can keep three caches (Nodes; TrafficProfiles; Pods with
// fieldSelector=spec.schedulerName=metronome) and refresh the extender when one changes:
//
//   ClusterState s = ...registry and plan...;
//   ApplyKubeInputs(s, nodes.Objects(), profiles.Objects(), pods.Objects());
//   extender.UpdateState(std::move(s));
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "metronome/extender/pod.hpp"
#include "metronome/extender/state.hpp"

namespace metronome::extender {

struct KubeInputStats {
  int profiles_skipped = 0;  // TrafficProfiles that do not parse
  int pods_skipped = 0;      // pods that are not Pods
};

// Fills s.node_labels, s.declared, s.measured (only for jobs without a measured profile yet) and
// s.placed_pods (running or pending pods that have a node, of recognisable jobs; finished pods
// are left out). Objects are keyed as kube::Cache keys them; only their values are read.
KubeInputStats ApplyKubeInputs(ClusterState& s, const std::map<std::string, nlohmann::json>& nodes,
                               const std::map<std::string, nlohmann::json>& profiles,
                               const std::map<std::string, nlohmann::json>& pods,
                               const PriorityMapping& mapping = {});

}  // namespace metronome::extender
