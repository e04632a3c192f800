// What the extender reads from a v1.Pod: which job it belongs to, its priority, and the traffic
// hints its annotations give. Labels and annotations (see docs/kubernetes.md):
//   job:      label metronome.dev/job, training.kubeflow.org/job-name, job-name or
//             batch.kubernetes.io/job-name (first found), else annotation metronome.dev/job
//   priority: spec.priority when the pod names a PriorityClass (spec.priorityClassName),
//             else annotation metronome.dev/priority (high | normal | low | integer),
//             else a non-zero spec.priority, else normal
//   traffic:  annotations metronome.dev/period-ms + metronome.dev/gradient-mb (explicit), or
//             metronome.dev/model (a model-table key) with metronome.dev/gpu-type (else the
//             node's GPU label); metronome.dev/ranks gives the ring size when known
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace metronome::extender {

using Json = nlohmann::json;

inline constexpr int kPriorityLow = 0;
inline constexpr int kPriorityNormal = 1;
inline constexpr int kPriorityHigh = 2;

struct PriorityMapping {
  // A PriorityClass value at or above this is "high", below low_below is "low".
  int64_t high_at_least = 1000;
  int64_t low_below = 0;
};

struct PodInfo {
  std::string namespace_name;
  std::string name;
  std::string job;  // "" when the pod belongs to no recognisable job
  int priority = kPriorityNormal;
  std::string priority_source;  // "priorityClass", "annotation", "spec.priority", "default"
  std::string model;
  std::string gpu_type;
  std::optional<double> period_ms;
  std::optional<double> gradient_mb;
  std::optional<int> ranks;
  std::string node_name;  // spec.nodeName (empty while unscheduled)
  std::string uid;        // metadata.uid
  std::string phase;      // status.phase ("" when the object has no status)
  // What the API server vouches for, for the scheduler's check of a shim's hello: spec.priority
  // (admission sets it from the PriorityClass; 0 without one) by the mapping. Annotations are
  // the pod owner's word and do not count here.
  int admitted_priority = kPriorityNormal;
};

// Reads a Pod object. Throws std::invalid_argument naming the field when the object is not a
// Pod at all (no metadata.name); odd optional fields (an unknown priority word, a non-numeric
// period) are ignored and listed in `warnings` when given.
PodInfo ParsePod(const nlohmann::json& pod, const PriorityMapping& mapping = {},
                 std::string* warnings = nullptr);

// "high" → 2, "normal" → 1, "low" → 0, or an integer in [-1e6, 1e6]; nullopt otherwise.
std::optional<int> ParsePriorityWord(const std::string& word);

}  // namespace metronome::extender
