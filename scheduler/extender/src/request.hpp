// One filter or prioritize request as the extender reads it: the pod (what job, what priority)
// and the candidate nodes, by name or as full Node objects.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "args_scanner.hpp"
#include "metronome/extender/extender.hpp"
#include "metronome/extender/pod.hpp"
#include "snapshot.hpp"

namespace metronome::extender {

struct Args {
  size_t pod_hash = 0;  // of the Pod's text: kube-scheduler sends the same Pod to both verbs
  PodInfo pod;
  std::string pod_warnings;
  bool full_nodes = false;                    // "Nodes" was sent (nodeCacheCapable: false)
  std::vector<std::string_view> node_items;   // the Node objects' text as received (full_nodes)
  std::vector<std::string> names;             // candidate names, in request order
  std::vector<std::string_view> label_texts;  // metadata.labels of each Node (full_nodes)
};

// Parses ExtenderArgs (throws BadRequest naming what is wrong).
Args ParseArgs(std::string_view body, const ExtenderConfig& config);

// Candidates the snapshot does not place yet: never seen, or seen without a rack that the
// request's Node object now gives.
std::map<std::string, NodeLabels> Unknown(const Extender::Snapshot& snap, const Args& args,
                                          const ExtenderConfig& config);

}  // namespace metronome::extender
