// The planner's view of a ClusterState, built once per state change (or when a request names
// nodes it has not seen) and shared read-only by concurrent requests.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "metronome/controller/plan_snapshot.hpp"
#include "metronome/extender/extender.hpp"
#include "metronome/models/model_table.hpp"
#include "metronome/planner/plan.hpp"
#include "metronome/planner/planner.hpp"

namespace metronome::extender {

namespace pl = metronome::planner;

struct Extender::Snapshot {
  explicit Snapshot(pl::Topology topology) : planner(std::move(topology)) {}

  uint64_t version = 0;
  pl::OnlinePlanner planner;  // the topology and the current plan
  // The planner's queries (WhatIf) use its scratch space, even through a const reference: the
  // requests that read this snapshot at once take turns on it.
  mutable std::mutex planner_mu;
  std::vector<pl::Job> jobs;                 // as adopted
  pl::Plan plan;                             // the service's timetables, as adopted
  controller::NodeIndex nodes;               // node names (and the unknown-nodes link) in `planner`
  controller::PlanningConfig planning;       // the scheduler's conversion of profiles
  std::unordered_set<std::string> unplaced;  // nodes known without a rack (unknown-nodes link)
  std::vector<std::string> node_gpu;         // by NodeId: model-table GPU key ("" unknown)
  std::vector<double> node_nic;              // by NodeId: bytes/s of its uplink (0: none)
  std::vector<double> link_load;             // by LinkId: planned contention-free load
  std::vector<std::vector<pl::JobId>> link_gated;  // by LinkId: gated jobs, highest priority first
  std::unordered_map<pl::JobId, std::string> job_names;
  std::unordered_map<pl::JobId, int> job_priorities;
  std::unordered_map<std::string, pl::JobId> job_ids;         // by name
  std::map<std::string, std::vector<std::string>> job_nodes;  // by name: ranks and placed pods
  std::map<std::string, MeasuredProfile> measured;            // registry jobs and earlier runs
  std::map<std::string, DeclaredProfile> declared;
};

// Builds a snapshot. `extra_labels` are labels learned from requests (full Node objects).
std::shared_ptr<const Extender::Snapshot> BuildSnapshot(
    const ClusterState& state, const std::map<std::string, NodeLabels>& extra_labels,
    const ExtenderConfig& config, const models::ModelTable* models);

// The model table's GPU key a node label value names ("NVIDIA-A100-SXM4-80GB" → "A100"), or "".
std::string MatchGpu(const std::string& label_value, const models::ModelTable* models);

// The first of `keys` that `labels` carries, or "".
std::string LabelOf(const NodeLabels* labels, const std::vector<std::string>& keys);

}  // namespace metronome::extender
