// What the extender needs to know about the cluster, in the service's terms (names, not planner
// ids): the network (the topology file and what node labels say), the jobs that run or are
// placed, the plan the scheduler's planner made for them (its own jobs and plan, not a copy
// rebuilt from timetables), and the traffic profiles known from TrafficProfile objects and from
// earlier runs. metronome-scheduler fills a ClusterState from its registry and plan and hands it
// to Extender::UpdateState() whenever its plan changes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/controller/config.hpp"
#include "metronome/controller/profile.hpp"

namespace metronome::controller {
struct PlanSnapshot;  // metronome/controller/plan_snapshot.hpp
}  // namespace metronome::controller

namespace metronome::extender {

// A node's labels, as the kube client's Node list/watch or a request's Node objects give them.
using NodeLabels = std::map<std::string, std::string>;

// A profile measured by the shims in this or an earlier run of a job: the controller's.
using controller::MeasuredProfile;

// A job the scheduler knows (from the shims' registrations, or placed pods): what the service's
// registry says of it after each plan (Service::View) and what the extender scores against.
struct JobSnapshot {
  uint64_t id = 0;   // the registry's id, the planner's job id (ClusterState::plan)
  std::string name;  // the job name the shims register (METRONOME_JOB: the job-name label)
  int priority = 1;  // 0 low, 1 normal, 2 high (or any integer: higher = more important)
  std::vector<std::string> nodes;  // one entry per rank or placed pod
  // The measured natural profile (period 0: unknown; the job is then left out of the what-if).
  MeasuredProfile profile;
  // Its current timetable, as pushed to its shims (meaningful when planned), for the status
  // writers; the extender scores against ClusterState::plan, which holds the same plan.
  bool planned = false;
  bool best_effort = false;
  Timetable timetable;
};

// A declared profile (the spec of a TrafficProfile object, see kube/resources.hpp).
struct DeclaredProfile {
  std::string job_name;
  std::string model;
  std::string gpu_type;
  std::optional<double> period_ms;
  std::optional<double> gradient_mb;
  std::string priority;  // high | normal | low | ""
};

struct ClusterState {
  uint64_t version = 0;                // the service's plan generation, for logs and the status API
  controller::TopologyConfig network;  // the scheduler's topology (its file or the default)
  controller::PlanningConfig planning;  // how the scheduler turns a profile into planner input
  std::vector<JobSnapshot> jobs;
  // The planners' jobs and plans as of `version`, one per part the scheduler plans apart (they
  // share no link; empty: nothing planned). A job in them is scored with the profile and the
  // window the planner gave it; any other job with a known profile is converted as the planner
  // would (controller::ToPlannerJob) and placed around that plan as a newcomer. Node and link
  // ids are BuildTopology(network)'s; the extender matches by name.
  std::vector<std::shared_ptr<const controller::PlanSnapshot>> plan;
  // Pods of jobs already bound to nodes but not registered yet (job name → node per pod).
  std::map<std::string, std::vector<std::string>> placed_pods;
  std::map<std::string, MeasuredProfile> measured;  // by job name, from earlier runs
  std::map<std::string, DeclaredProfile> declared;  // by job name, from TrafficProfiles
  std::map<std::string, NodeLabels> node_labels;    // by node name (nodeCacheCapable: true)
};

}  // namespace metronome::extender
