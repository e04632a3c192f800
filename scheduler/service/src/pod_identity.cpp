#include "pod_identity.hpp"

namespace metronome::service {

namespace {

HelloVerdict Refuse(std::string reason, std::string message) {
  HelloVerdict v;
  v.reason = std::move(reason);
  v.message = std::move(message);
  return v;
}

}  // namespace

HelloVerdict CheckHelloAgainstPods(const proto::Hello& hello, const PodDirectory* pods) {
  if (hello.pod_namespace.empty() || hello.pod_name.empty() || hello.pod_uid.empty()) {
    return Refuse("pod_missing",
                  "the hello names no pod (METRONOME_NAMESPACE, METRONOME_POD and "
                  "METRONOME_POD_UID from the downward API)");
  }
  const std::string key = hello.pod_namespace + "/" + hello.pod_name;
  if (pods == nullptr) {
    return Refuse("pod_unknown", "pod " + key +
                                     ": the scheduler has not read pods from the API "
                                     "server yet");
  }
  const auto it = pods->find(key);
  if (it == pods->end()) {
    return Refuse("pod_unknown", "pod " + key +
                                     " is not a pod the API server knows "
                                     "(with spec.schedulerName metronome)");
  }
  const extender::PodInfo& pod = it->second;
  if (pod.uid != hello.pod_uid) {
    return Refuse("pod_uid", "pod " + key + " has UID " + pod.uid + ", not " + hello.pod_uid);
  }
  if (pod.phase == "Succeeded" || pod.phase == "Failed") {
    return Refuse("pod_finished", "pod " + key + " has finished (" + pod.phase + ")");
  }
  if (pod.node_name != hello.node) {
    return Refuse("pod_node",
                  "pod " + key + " runs on node '" + pod.node_name + "', not '" + hello.node + "'");
  }
  if (pod.job != hello.job_id) {
    return Refuse("pod_job",
                  "pod " + key + " belongs to job '" + pod.job + "', not '" + hello.job_id + "'");
  }
  HelloVerdict v;
  v.priority = pod.admitted_priority;
  v.job_namespace = pod.namespace_name;
  return v;
}

}  // namespace metronome::service
