// A job the plan does not hold yet: its shims are still learning its rhythm (no profile), so the
// planner has nothing to place. It runs ungated, but it must not start its phases into the
// windows of the gated jobs of higher priority on its links: until it is planned it yields to
// them, as a best-effort job does (docs/decisions/0016). The service and the simulator gather
// the planned jobs and ask here what each unplanned one yields to.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "metronome/common/yield.hpp"
#include "metronome/controller/config.hpp"
#include "metronome/controller/job_state.hpp"

namespace metronome::controller {

// The planned jobs whose plan gates them (not best-effort, not always open), by link.
class GatedJobsByLink {
 public:
  // Counts `job` on each of its links if its plan gates it. The job must outlive the index.
  void Add(const JobState& job);
  [[nodiscard]] bool Empty() const { return by_link_.empty(); }

  // What an unplanned job of `priority` on `links` yields to: the windows of the jobs of higher
  // priority on those links, highest-ranked first (priority, then the larger share of the
  // period, then the id), at most kMaxYieldWindows. Its phase is not measured yet, so it needs
  // no gap of any length and has no tolerance: it only never starts inside such a window, and
  // waits at most the longest of their periods. Empty when there is none.
  [[nodiscard]] YieldSet YieldsFor(int32_t priority, const std::vector<std::string>& links) const;

 private:
  std::unordered_map<std::string, std::vector<const JobState*>> by_link_;
};

// An unplanned job takes `yields` (its wait capped by timetable.max_wait_ms, as a planned job's
// is) with a timetable that never holds a phase, under a new version when either changed (a set
// that empties is pushed too: the shims stop yielding). True when its ranks must be pushed. A
// planned job is left as it is (false).
bool AdoptObserverYields(JobState& job, YieldSet yields, const TimetableConfig& config);

}  // namespace metronome::controller
