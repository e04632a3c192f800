#include "request.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <stdexcept>

namespace metronome::extender {

Args ParseArgs(std::string_view body, const ExtenderConfig& config) {
  ScannedArgs scanned = ScanArgs(body);
  Args a;
  if (scanned.pod.empty()) throw BadRequest("ExtenderArgs.Pod is missing");
  a.pod_hash = std::hash<std::string_view>{}(scanned.pod);
  const Json pod = Json::parse(scanned.pod, nullptr, false);
  if (pod.is_discarded()) throw BadRequest("ExtenderArgs.Pod is not JSON");
  try {
    a.pod = ParsePod(pod, config.priority, &a.pod_warnings);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(std::string("ExtenderArgs.Pod: ") + e.what());
  }
  if (scanned.has_nodes) {
    a.full_nodes = true;
    a.names.reserve(scanned.nodes.size());
    a.node_items.reserve(scanned.nodes.size());
    a.label_texts.reserve(scanned.nodes.size());
    for (ScannedNode& n : scanned.nodes) {
      a.names.push_back(std::move(n.name));
      a.node_items.push_back(n.raw);
      a.label_texts.push_back(n.labels);
    }
  } else if (scanned.has_names) {
    a.names = std::move(scanned.names);
  }
  return a;
}

std::map<std::string, NodeLabels> Unknown(const Extender::Snapshot& snap, const Args& args,
                                          const ExtenderConfig& config) {
  std::map<std::string, NodeLabels> unknown;
  for (size_t i = 0; i < args.names.size(); ++i) {
    const std::string& n = args.names[i];
    const bool seen = snap.nodes.ids.count(n) != 0;
    if (seen && snap.unplaced.count(n) == 0) continue;
    NodeLabels labels;
    if (args.full_nodes) labels = DecodeLabels(args.label_texts[i]);
    if (!seen || !LabelOf(&labels, config.rack_labels).empty()) unknown[n] = std::move(labels);
  }
  return unknown;
}

}  // namespace metronome::extender
