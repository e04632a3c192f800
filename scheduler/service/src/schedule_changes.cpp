#include "schedule_changes.hpp"

#include <utility>

namespace metronome::service {

namespace {

bool SameSchedule(const controller::JobSchedule& a, const controller::JobSchedule& b) {
  // The yields are shared: the same pointer where the planner kept the set, else compared.
  const bool same_yields = a.yields == b.yields || (a.yields && b.yields && *a.yields == *b.yields);
  return a.id == b.id && a.best_effort == b.best_effort && a.timetable == b.timetable &&
         same_yields && a.yielded_to == b.yielded_to &&
         a.predicted_slowdown == b.predicted_slowdown;
}

}  // namespace

void ScheduleChanges::KeepChanged(std::vector<controller::JobSchedule>& jobs) {
  ++round_;
  std::vector<controller::JobSchedule> changed;
  for (auto& s : jobs) {
    auto [it, fresh] = handed_.try_emplace(s.id);
    it->second.round = round_;
    if (!fresh && SameSchedule(it->second.schedule, s)) continue;
    it->second.schedule = s;
    changed.push_back(std::move(s));
  }
  std::erase_if(handed_, [this](const auto& h) { return h.second.round != round_; });
  jobs = std::move(changed);
}

}  // namespace metronome::service
