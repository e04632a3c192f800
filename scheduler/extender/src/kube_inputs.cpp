// Kubernetes objects into ClusterState (see kube_inputs.hpp).
#include "metronome/extender/kube_inputs.hpp"

#include <cmath>

#include "metronome/kube/resources.hpp"

namespace metronome::extender {

KubeInputStats ApplyKubeInputs(ClusterState& s, const std::map<std::string, nlohmann::json>& nodes,
                               const std::map<std::string, nlohmann::json>& profiles,
                               const std::map<std::string, nlohmann::json>& pods,
                               const PriorityMapping& mapping) {
  KubeInputStats stats;
  for (const auto& [key, object] : nodes) {
    kube::NodeInfo n = kube::ParseNode(object);
    if (!n.name.empty()) s.node_labels[n.name] = std::move(n.labels);
  }
  for (const auto& [key, object] : profiles) {
    auto p = kube::ParseTrafficProfile(object);
    if (!p) {
      ++stats.profiles_skipped;
      continue;
    }
    DeclaredProfile d;
    d.job_name = p->job_name;
    d.model = p->model;
    d.gpu_type = p->gpu_type;
    d.period_ms = p->period_ms;
    d.gradient_mb = p->gradient_mb;
    d.priority = p->priority;
    s.declared[p->job_name] = std::move(d);
    // What the shims measured, as written into the status: a profile for later runs.
    if (p->measured_period_ms && p->measured_comm_ms && *p->measured_period_ms > 0 &&
        s.measured.count(p->job_name) == 0) {
      MeasuredProfile m;
      m.period_ns = std::llround(*p->measured_period_ms * 1e6);
      m.comm_ns = std::llround(*p->measured_comm_ms * 1e6);
      m.bytes_per_phase = p->bytes_per_phase ? static_cast<uint64_t>(*p->bytes_per_phase) : 0;
      s.measured[p->job_name] = m;
    }
  }
  for (const auto& [key, object] : pods) {
    PodInfo pod;
    try {
      pod = ParsePod(object, mapping);
    } catch (const std::invalid_argument&) {
      ++stats.pods_skipped;
      continue;
    }
    if (pod.job.empty() || pod.node_name.empty()) continue;
    std::string phase;
    if (const auto status = object.find("status"); status != object.end() && status->is_object()) {
      if (const auto p = status->find("phase"); p != status->end() && p->is_string()) {
        phase = p->get<std::string>();
      }
    }
    if (phase == "Succeeded" || phase == "Failed") continue;
    s.placed_pods[pod.job].push_back(pod.node_name);
  }
  return stats;
}

}  // namespace metronome::extender
