// Which planning part plans which job. The service plans the cluster in a few parts, each with
// its own planner and lock, so that a round in one part never waits for a round in another
// (planning_worker.hpp). Two jobs that share a link must be planned by the same planner (their
// windows take turns on it), so every link that a job crosses belongs to the part that plans
// the job, and a job whose links belong to two parts joins them: the jobs connected to it move
// into one of the two (MoveConnected).
//
// A job holds the links it claimed until it leaves: a re-plan on other nodes claims the new
// links beside the old (its part keeps both until the job leaves: held a little too long, never
// too short). Used by the planning worker under its lock; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace metronome::service {

class PartMap {
 public:
  explicit PartMap(size_t parts);

  size_t Parts() const { return jobs_per_part_.size(); }
  size_t Jobs(size_t part) const { return jobs_per_part_.at(part); }
  std::optional<size_t> PartOf(uint64_t job) const;
  // The parts that hold `job` or a job on one of `links`.
  std::set<size_t> PartsOf(uint64_t job, const std::vector<uint32_t>& links) const;
  // `job` on `links` in `part`, which must be the only part in PartsOf(job, links).
  void Claim(uint64_t job, const std::vector<uint32_t>& links, size_t part);
  // Moves into `into` the jobs of `from` that `job` (if it is there) and `links` reach through
  // links they share, with their links, and `job` itself if it is in `from`; returns them.
  std::vector<uint64_t> MoveConnected(size_t from, uint64_t job, const std::vector<uint32_t>& links,
                                      size_t into);
  // The job is planned nowhere any more: its links are free.
  void Release(uint64_t job);

 private:
  struct Held {
    size_t part = 0;
    std::vector<uint32_t> links;  // sorted
  };
  struct Link {
    size_t part = 0;
    std::unordered_set<uint64_t> jobs;
  };
  std::unordered_map<uint64_t, Held> jobs_;
  std::unordered_map<uint32_t, Link> links_;  // only links some job holds
  std::vector<size_t> jobs_per_part_;
};

}  // namespace metronome::service
