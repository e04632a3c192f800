#include "metronome/controller/config.hpp"

namespace metronome::controller {

TopologyConfig TopologyConfig::Default() {
  TopologyConfig t;
  t.links.push_back({"default", 100e9 / 8.0});
  t.unknown_nodes_link = "default";
  return t;
}

}  // namespace metronome::controller
