// With the Kubernetes integration on, a shim's hello is checked against the pod it names before
// its rank registers: the pod must be one the API server knows (by namespace, name and UID, as
// the downward API gives them to the shim), run on the node the hello names and belong to the
// job the hello names; the job's priority is then the pod's spec.priority by the extender's
// mapping, whatever the hello says. A job belongs to the namespace of its first verified rank:
// pods of another namespace cannot report under its name. (docs/kubernetes.md, "Identity and
// priority".)
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "metronome/common/protocol.hpp"
#include "metronome/extender/pod.hpp"

namespace metronome::service {

// The API server's pods by "namespace/name" (those the scheduler watches).
using PodDirectory = std::map<std::string, extender::PodInfo>;

struct HelloVerdict {
  // "" when the hello may register; otherwise the rejection's reason (a metrics label:
  // pod_missing, pod_unknown, pod_uid, pod_finished, pod_node, pod_job) and its explanation.
  std::string reason;
  std::string message;
  int32_t priority = 0;       // the job's priority, from the pod (when accepted)
  std::string job_namespace;  // the namespace the job belongs to (when accepted)
};

// `pods` is null until the scheduler has read pods from the API server (then every hello is
// refused: pod_unknown).
HelloVerdict CheckHelloAgainstPods(const proto::Hello& hello, const PodDirectory* pods);

}  // namespace metronome::service
