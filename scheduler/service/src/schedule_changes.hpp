// The schedules a planning round changed. The planner summarizes every job each round; the
// registry adopts a schedule (AdoptSchedule) under the lock that every report and clock ping
// also takes, so the planning round first drops, without any lock, the schedules that are the
// same as those it handed over the round before: a round that moved a few jobs of thousands then
// holds that lock for those few.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "metronome/controller/planning.hpp"

namespace metronome::service {

class ScheduleChanges {
 public:
  // Leaves in `jobs` only the schedules that differ from those listed the last time (a job not
  // listed then counts as changed) and forgets the jobs no longer listed.
  void KeepChanged(std::vector<controller::JobSchedule>& jobs);
  // The jobs listed the last time.
  std::size_t Jobs() const { return handed_.size(); }

 private:
  struct Handed {
    controller::JobSchedule schedule;
    uint64_t round = 0;  // the last call that listed the job
  };
  std::unordered_map<uint64_t, Handed> handed_;  // by job id
  uint64_t round_ = 0;
};

}  // namespace metronome::service
