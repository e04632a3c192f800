// The policy registry: every policy the simulator knows, by name (docs/simulator.md, "Policies").
#include <stdexcept>
#include <string>
#include <vector>

#include "metronome/sim/placement.hpp"
#include "metronome/sim/simulator.hpp"

namespace metronome::sim {

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {"k8s-default",
                                                  "network-aware",
                                                  "cassini",
                                                  "metronome",
                                                  "metronome-no-cushion",
                                                  "metronome-no-stretch",
                                                  "metronome-no-controller",
                                                  "metronome-pack",
                                                  "metronome-no-yields",
                                                  "metronome-no-turns",
                                                  "network-aware-qos",
                                                  "metronome-qos",
                                                  "network-aware-serial",
                                                  "network-aware-alone"};
  return kNames;
}

PolicyConfig PolicyByName(const std::string& name) {
  PolicyConfig p;
  p.name = name;
  p.placement = static_cast<int>(PlacementKind::kPack);
  if (name.rfind("metronome", 0) == 0 && name != "metronome-pack" && name != "metronome-qos") {
    p.placement = static_cast<int>(PlacementKind::kScored);
  }
  if (name == "k8s-default") {
    p.placement = static_cast<int>(PlacementKind::kSpread);
  } else if (name == "network-aware") {
  } else if (name == "cassini") {
    p.scheduling = SchedulingKind::kCassini;
  } else if (name == "metronome" || name == "metronome-pack" || name == "metronome-no-turns") {
    // metronome-pack: Metronome's time scheduling on network-aware placement (no what-if
    // scoring; its placement is set above). metronome-no-turns: an ablation, no job takes
    // turns (controller.turns: false; below).
    p.scheduling = SchedulingKind::kMetronome;
  } else if (name == "metronome-no-yields") {
    // An ablation: no job yields to the windows ranked above it (ranked_yields.hpp); the
    // best-effort ones run at their own pace.
    p.scheduling = SchedulingKind::kMetronome;
    p.yields = false;
  } else if (name == "metronome-no-cushion") {
    p.scheduling = SchedulingKind::kMetronome;
    p.cushion = false;  // PlannerOptions::cushion: no stage 3, no minimum cushion, no slack
  } else if (name == "metronome-no-stretch") {
    p.scheduling = SchedulingKind::kMetronome;
    p.stretch = false;
  } else if (name == "network-aware-qos") {
    // No time scheduling; the traffic classes of the priorities on a fabric that honours them.
    p.sharing = Sharing::kByClass;
  } else if (name == "metronome-qos") {
    // Metronome's time scheduling on network-aware placement, on that fabric.
    p.scheduling = SchedulingKind::kMetronome;
    p.sharing = Sharing::kByClass;
  } else if (name == "network-aware-serial") {
    // References for what time scheduling could reach on network-aware placement: colliding
    // transfers served one after the other (ideal taking turns) ...
    p.sharing = Sharing::kStartOrder;
  } else if (name == "network-aware-alone") {
    // ... and no collision at all.
    p.sharing = Sharing::kAlone;
  } else if (name == "metronome-no-controller") {
    p.scheduling = SchedulingKind::kMetronome;
    p.controller = false;
  } else {
    std::string all;
    for (const auto& n : PolicyNames()) all += (all.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown policy '" + name + "' (known: " + all + ")");
  }
  // Metronome takes turns as the service does by default (controller.turns), each job told of
  // its partner's phase edges 2 ms late (docs/decisions/0029); all but the ablation without.
  if (p.scheduling == SchedulingKind::kMetronome && name != "metronome-no-turns") {
    p.turn_relay_ms = kDefaultTurnRelayMs;
  }
  return p;
}

}  // namespace metronome::sim
