// Built when the tree has no model table library: scenarios must give compute_ms / gradient_mb.
#include "metronome/sim/scenario.hpp"

namespace metronome::sim {

ModelLookup DefaultModelLookup() {
  return {};
}

}  // namespace metronome::sim
