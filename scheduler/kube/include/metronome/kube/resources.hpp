// Typed views of the objects Metronome reads and writes (k8s/base/crds/*.yaml):
//   TrafficProfile (metronome.dev/v1alpha1, namespaced): a job's declared rhythm; read.
//   Node (core/v1): its labels give the rack and the GPU type; read.
//   LinkSchedule (metronome.dev/v1alpha1, cluster-scoped): one link and its planned time slots;
//     created if missing, its status written by the scheduler.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "metronome/kube/client.hpp"

namespace metronome::kube {

struct TrafficProfile {
  std::string namespace_name;
  std::string name;
  std::string job_name;               // spec.jobName
  std::string model;                  // spec.model ("" when not given)
  std::string gpu_type;               // spec.gpuType
  std::optional<double> period_ms;    // spec.periodMs
  std::optional<double> gradient_mb;  // spec.gradientMB (MiB)
  std::string priority_class_name;
  std::string priority;  // "high" | "normal" | "low" | ""
  // status (what the shims measured)
  std::optional<double> measured_period_ms;
  std::optional<double> measured_comm_ms;
  std::optional<int64_t> bytes_per_phase;
};

// Reads one TrafficProfile object; an error says which field is wrong.
Result<TrafficProfile> ParseTrafficProfile(const Json& object);
// All TrafficProfiles (`ns` empty: every namespace). Objects that do not parse are skipped
// and counted in `skipped` when given.
Result<std::vector<TrafficProfile>> ListTrafficProfiles(Client& client, const std::string& ns = "",
                                                        int* skipped = nullptr);

struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  bool unschedulable = false;
};
NodeInfo ParseNode(const Json& object);
Result<std::vector<NodeInfo>> ListNodes(Client& client, const std::string& label_selector = "");
// The first of `rack_labels` that the node carries ("" when none).
std::string RackOf(const NodeInfo& node, const std::vector<std::string>& rack_labels);

struct LinkScheduleJob {
  std::string name;
  int priority = 0;
  double period_ms = 0;
  double offset_ms = 0;
  double window_ms = 0;
  double late_slack_ms = 0;
  double stretch = 0;  // (T − P) / P
  bool best_effort = false;
};

struct LinkScheduleSpec {
  std::string name;  // object name: a DNS subdomain (see LinkObjectName)
  double capacity_gbps = 0;
  std::string kind;  // node-uplink | rack-uplink | explicit | ""
  std::vector<std::string> nodes;
};

struct LinkScheduleStatus {
  int64_t plan_version = 0;
  double hyperperiod_ms = 0;
  double planned_utilization = 0;  // clamped to [0, 1]
  std::optional<double> measured_utilization;
  double min_cushion_ms = 0;
  std::vector<LinkScheduleJob> jobs;
  std::string last_update;  // RFC 3339; empty: now
};

// A planner link name ("r0/up", "gpu-node-1/up") as a valid object name ("r0-up").
std::string LinkObjectName(const std::string& link_name);

Json ToJson(const LinkScheduleSpec& spec);
Json ToJson(const LinkScheduleStatus& status);
Result<LinkScheduleStatus> ParseLinkScheduleStatus(const Json& status);

// Makes sure the LinkSchedule exists (creates it with `spec` when missing; an operator's spec
// is left as it is when it already exists) and writes `status` with a merge-patch on the status
// subresource (the jobs list is replaced as a whole).
Status ApplyLinkSchedule(Client& client, const LinkScheduleSpec& spec,
                         const LinkScheduleStatus& status);

// Writes the LinkSchedules of a whole plan, skipping links whose status has not changed since
// its last successful write (lastUpdate aside): a plan republished every few seconds costs the
// API server nothing while nothing moves. Not thread-safe: one writer per syncing thread.
class LinkScheduleWriter {
 public:
  explicit LinkScheduleWriter(Client& client) : client_(client) {}
  struct Outcome {
    int written = 0;
    int unchanged = 0;
    int failed = 0;
    Error first_error;
  };
  Outcome Write(const std::vector<std::pair<LinkScheduleSpec, LinkScheduleStatus>>& links);
  void Forget() { last_.clear(); }  // write everything next time (e.g. after a restart of etcd)

 private:
  Client& client_;
  std::map<std::string, std::string> last_;  // object name → status written, without lastUpdate
};

// What the shims measured of a TrafficProfile's job, for its status (the extender reads it back
// as the job's profile for later runs).
struct TrafficProfileStatus {
  std::string namespace_name;
  std::string name;  // the TrafficProfile object's
  double measured_period_ms = 0;
  double measured_comm_ms = 0;
  uint64_t bytes_per_phase = 0;
  int reporting_ranks = 0;
};

// Writes TrafficProfile statuses with a merge-patch on the status subresource, skipping those
// whose figures have not changed since their last successful write, and those written less than
// `every` ago (measured figures move with every report: a large cluster's plan changes would
// otherwise patch every profile each time). Not thread-safe.
class TrafficProfileStatusWriter {
 public:
  explicit TrafficProfileStatusWriter(Client& client,
                                      std::chrono::milliseconds every = std::chrono::seconds(30))
      : client_(client), every_(every) {}
  LinkScheduleWriter::Outcome Write(const std::vector<TrafficProfileStatus>& statuses);
  void Forget() { last_.clear(); }

 private:
  struct Written {
    std::string figures;
    std::chrono::steady_clock::time_point at;
  };
  Client& client_;
  std::chrono::milliseconds every_;
  std::map<std::string, Written> last_;  // by "namespace/name"
};

// RFC 3339 UTC timestamp of now, second precision ("2026-11-29T12:00:00Z").
std::string NowRfc3339();

}  // namespace metronome::kube
