#include "metronome/controller/observer_yields.hpp"

#include <algorithm>

#include "metronome/planner/ranked_yields.hpp"

namespace metronome::controller {

namespace {

bool Gates(const JobState& job) {
  return job.planned && !job.best_effort && !AlwaysOpen(job.timetable);
}

double Duty(const Timetable& t) {
  return static_cast<double>(t.window_ns) / static_cast<double>(t.period_ns);
}

}  // namespace

void GatedJobsByLink::Add(const JobState& job) {
  if (!Gates(job)) return;
  for (const std::string& l : job.links) by_link_[l].push_back(&job);
}

YieldSet GatedJobsByLink::YieldsFor(int32_t priority, const std::vector<std::string>& links) const {
  std::vector<const JobState*> above;
  for (const std::string& l : links) {
    const auto it = by_link_.find(l);
    if (it == by_link_.end()) continue;
    for (const JobState* j : it->second) {
      if (planner::RanksAbove(j->priority, priority) &&
          std::find(above.begin(), above.end(), j) == above.end()) {
        above.push_back(j);
      }
    }
  }
  std::sort(above.begin(), above.end(), [](const JobState* a, const JobState* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    const double da = Duty(a->timetable);
    const double db = Duty(b->timetable);
    if (da != db) return da > db;
    return a->id < b->id;
  });
  if (above.size() > kMaxYieldWindows) above.resize(kMaxYieldWindows);
  YieldSet y;
  if (above.empty()) return y;
  y.epoch_ns = above.front()->timetable.epoch_ns;
  for (const JobState* j : above) {
    const Timetable& t = j->timetable;
    // Each window in the set's epoch (the planning parts' plans may each have their own).
    const int64_t offset =
        FloorMod(SaturatingAdd(t.offset_ns, t.epoch_ns - y.epoch_ns), t.period_ns);
    y.windows[y.count++] = {t.period_ns, offset, std::min(t.window_ns, t.period_ns - 1)};
    y.max_wait_ns = std::max(y.max_wait_ns, t.period_ns);
  }
  // Timetables the plan validated: this fills the inverse periods (and caps the wait).
  if ((ValidateYieldSet(y) & kYieldRejectMask) != 0) return YieldSet{};
  return y;
}

bool AdoptObserverYields(JobState& job, YieldSet yields, const TimetableConfig& config) {
  if (yields.count > 0) {
    yields.max_wait_ns = std::min(yields.max_wait_ns, config.max_wait_ms * 1'000'000);
  }
  if (job.planned || job.yields == yields) return false;
  Timetable tt;
  tt.version = job.timetable.version + 1;
  tt.epoch_ns = yields.count > 0 ? yields.epoch_ns : job.timetable.epoch_ns;
  // No gate: a window as long as the period (the shims yield, never hold a phase for it).
  tt.period_ns = yields.count > 0              ? yields.max_wait_ns
                 : job.timetable.period_ns > 0 ? job.timetable.period_ns
                                               : TimetableLimits{}.max_period_ns;
  tt.window_ns = tt.period_ns;
  if ((ValidateTimetable(tt) & kTimetableRejectMask) != 0) return false;
  job.timetable = tt;
  job.yields = yields;
  return true;
}

}  // namespace metronome::controller
