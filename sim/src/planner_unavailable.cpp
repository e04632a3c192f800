// Built instead of planner_adapter.cpp when the tree has no planner library (scheduler/planner):
// the policies that need it report that they are unavailable.
#include <stdexcept>

#include "metronome/sim/time_scheduler.hpp"

namespace metronome::sim {

bool PlannerAvailable() {
  return false;
}

std::unique_ptr<TimeScheduler> MakeTimeScheduler(const PolicyConfig& policy, const Cluster&,
                                                 std::size_t) {
  if (policy.scheduling == SchedulingKind::kNone) return nullptr;
  throw std::runtime_error("policy '" + policy.name +
                           "' needs the planner library, which this build does not have");
}

}  // namespace metronome::sim
