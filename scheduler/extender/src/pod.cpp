// Reading a v1.Pod (see pod.hpp).
#include "metronome/extender/pod.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace metronome::extender {

namespace {

const Json* Member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string StringAt(const Json* obj, const char* key) {
  if (obj == nullptr) return {};
  const Json* v = Member(*obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::optional<double> PositiveNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v <= 0) {
    return std::nullopt;
  }
  return v;
}

void Warn(std::string* warnings, const std::string& what) {
  if (warnings == nullptr) return;
  if (!warnings->empty()) *warnings += "; ";
  *warnings += what;
}

int MapPriorityValue(int64_t value, const PriorityMapping& m) {
  if (value >= m.high_at_least) return kPriorityHigh;
  if (value < m.low_below) return kPriorityLow;
  return kPriorityNormal;
}

}  // namespace

std::optional<int> ParsePriorityWord(const std::string& word) {
  if (word == "high") return kPriorityHigh;
  if (word == "normal") return kPriorityNormal;
  if (word == "low") return kPriorityLow;
  int v = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (word.empty() || ec != std::errc() || end != word.data() + word.size()) return std::nullopt;
  if (v < -1'000'000 || v > 1'000'000) return std::nullopt;
  return v;
}

PodInfo ParsePod(const Json& pod, const PriorityMapping& mapping, std::string* warnings) {
  if (!pod.is_object()) throw std::invalid_argument("Pod is not an object");
  const Json* meta = Member(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) throw std::invalid_argument("Pod has no metadata");
  PodInfo info;
  info.name = StringAt(meta, "name");
  if (info.name.empty()) {
    // kube-scheduler always sends a named pod; generateName alone means a malformed request.
    throw std::invalid_argument("Pod has no metadata.name");
  }
  info.namespace_name = StringAt(meta, "namespace");
  info.uid = StringAt(meta, "uid");
  info.phase = StringAt(Member(pod, "status"), "phase");
  const Json* labels = Member(*meta, "labels");
  const Json* annotations = Member(*meta, "annotations");
  if (labels != nullptr && !labels->is_object()) throw std::invalid_argument("Pod labels");
  if (annotations != nullptr && !annotations->is_object()) {
    throw std::invalid_argument("Pod annotations is not an object");
  }

  for (const char* key : {"metronome.dev/job", "training.kubeflow.org/job-name", "job-name",
                          "batch.kubernetes.io/job-name"}) {
    info.job = StringAt(labels, key);
    if (!info.job.empty()) break;
  }
  if (info.job.empty()) info.job = StringAt(annotations, "metronome.dev/job");

  const Json* spec = Member(pod, "spec");
  if (spec != nullptr && !spec->is_object()) throw std::invalid_argument("Pod spec");
  std::optional<int64_t> spec_priority;
  if (spec != nullptr) {
    if (const Json* p = Member(*spec, "priority"); p != nullptr && p->is_number_integer()) {
      spec_priority = p->get<int64_t>();
    }
    info.node_name = StringAt(spec, "nodeName");
  }
  info.admitted_priority = MapPriorityValue(spec_priority.value_or(0), mapping);
  const std::string class_name = spec != nullptr ? StringAt(spec, "priorityClassName") : "";
  const std::string word = StringAt(annotations, "metronome.dev/priority");
  if (!class_name.empty() && spec_priority) {
    info.priority = MapPriorityValue(*spec_priority, mapping);
    info.priority_source = "priorityClass";
  } else if (const auto p = ParsePriorityWord(word); !word.empty() && p) {
    info.priority = *p;
    info.priority_source = "annotation";
  } else {
    if (!word.empty()) Warn(warnings, "metronome.dev/priority '" + word + "' is not a priority");
    if (spec_priority && *spec_priority != 0) {
      info.priority = MapPriorityValue(*spec_priority, mapping);
      info.priority_source = "spec.priority";
    } else {
      info.priority = kPriorityNormal;
      info.priority_source = "default";
    }
  }

  info.model = StringAt(annotations, "metronome.dev/model");
  info.gpu_type = StringAt(annotations, "metronome.dev/gpu-type");
  const std::string period = StringAt(annotations, "metronome.dev/period-ms");
  const std::string gradient = StringAt(annotations, "metronome.dev/gradient-mb");
  info.period_ms = PositiveNumber(period);
  info.gradient_mb = PositiveNumber(gradient);
  if (!period.empty() && !info.period_ms) {
    Warn(warnings, "metronome.dev/period-ms '" + period + "' is not a positive number");
  }
  if (!gradient.empty() && !info.gradient_mb) {
    Warn(warnings, "metronome.dev/gradient-mb '" + gradient + "' is not a positive number");
  }
  const std::string ranks = StringAt(annotations, "metronome.dev/ranks");
  if (const auto r = PositiveNumber(ranks); r && *r >= 1 && *r <= 1e6) {
    info.ranks = static_cast<int>(*r);
  } else if (!ranks.empty()) {
    Warn(warnings, "metronome.dev/ranks '" + ranks + "' is not a rank count");
  }
  return info;
}

}  // namespace metronome::extender
