// A structural scanner for ExtenderArgs bodies. With nodeCacheCapable: false kube-scheduler sends
// every candidate Node in full (about 3 KB each, megabytes for 1,000 nodes); building a JSON tree
// of all of it, only to read each node's name and labels and to write the survivors back, would
// cost tens of milliseconds. The scanner walks the text once, keeps each node item as a slice of
// the original text and decodes only metadata.name (and metadata.labels, on demand, for nodes
// the extender has not seen yet). It checks the text as a JSON parser does (structure, string
// escapes and UTF-8, number syntax; nesting at most 128 deep): the slices of the nodes that pass
// go back to kube-scheduler as they came, so they must be JSON. The Pod and NodeNames, which are
// small, are parsed as usual.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "metronome/extender/state.hpp"

namespace metronome::extender {

// A request that does not follow ExtenderArgs (the message says where): HTTP 400.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ScannedNode {
  std::string name;
  std::string_view labels;  // metadata.labels' text ("" when absent), see DecodeLabels
  std::string_view raw;     // the item's text, to be sent back as it came
};

struct ScannedArgs {
  std::string_view pod;  // the Pod's text ("" when absent or null)
  bool has_nodes = false;
  std::vector<ScannedNode> nodes;
  bool has_names = false;
  std::vector<std::string> names;
};

// Throws BadRequest.
ScannedArgs ScanArgs(std::string_view body);

// The string-valued members of a labels object's text (others are ignored).
NodeLabels DecodeLabels(std::string_view text);

}  // namespace metronome::extender
