// The one place where the controller meets the planner library (metronome::planner).
//
// The registry speaks in job names, node names and measured profiles; the planner in numeric ids,
// topology indices and JobProfile. This adapter converts the registry's jobs into planner::Job,
// keeps the planner's stateful OnlinePlanner, and converts its Plan back into timetables. Neither
// the scheduler service nor the simulator's Metronome includes a planner header.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/common/yield.hpp"
#include "metronome/controller/config.hpp"
#include "metronome/controller/profile.hpp"

namespace metronome::controller {

// A job as the registry knows it, ready to plan.
struct PlanJob {
  uint64_t id = 0;  // the registry's numeric id for the job (stable while the job lives)
  std::string name;
  int priority = 0;
  std::vector<std::string> nodes;  // one entry per rank (duplicates allowed)
  MeasuredProfile profile;
  int64_t next_phase_ns = 0;  // its next phase start, scheduler clock (0: unknown)
};

// The planner's verdict for one job: its timetable (the plan entry's, at the plan's epoch;
// version 0 until the service numbers it) and what the plan says of it.
struct JobSchedule {
  uint64_t id = 0;
  bool best_effort = false;
  Timetable timetable;
  // The higher-ranked windows it must not start into, in the plan's frame (offsets from its
  // timetable's epoch); null when there are none. Shared, never modified.
  std::shared_ptr<const YieldSet> yields;
  // Gated, met by ungated jobs on its links, and all of them yield to it
  // (planner::JobYields::yielded_to): nothing the plan does not control meets its window.
  bool yielded_to = false;
  double predicted_slowdown = 0.0;
};

struct LinkSchedule {
  std::string name;
  double capacity_bytes_per_s = 0.0;
  int64_t hyperperiod_ns = 0;
  double served_load = 0.0;
  int64_t min_cushion_ns = -1;
  double contention = 0.0;
  uint32_t gated_jobs = 0;
  uint32_t best_effort_jobs = 0;
};

struct PlanSnapshot;  // the same plan in the planner's terms (plan_snapshot.hpp)

struct PlanSummary {
  int64_t epoch_ns = 0;
  std::vector<JobSchedule> jobs;
  std::vector<LinkSchedule> links;  // every link of the topology, by index
  double utilization = 0.0;         // the planner's score, stage by stage
  double latency = 0.0;
  double cushion_ns = 0.0;
  std::shared_ptr<const PlanSnapshot> snapshot;  // shared, never modified
};

struct WhatIfEntry {
  std::string job;  // name; the candidate is listed too
  bool candidate = false;
  double slowdown_now = 0.0;
  double slowdown_after = 0.0;
  bool best_effort_after = false;
  bool moved = false;  // its period or offset would change
  // The candidate's entry only: Σ π·(after − before) over the jobs on its links, and whether it
  // would contend with a gated job of higher priority (the extender's filter).
  double neighbour_slowdown = 0.0;
  bool hurts_higher_priority = false;
};

// A background recalculation's input and output (RunOffline runs without any lock).
struct OfflineTask;
struct OfflineResult {
  bool improved = false;
  uint64_t generation = 0;           // the adapter generation the search started from
  std::vector<uint64_t> moved;       // jobs whose period or offset would change
  std::shared_ptr<const void> plan;  // opaque: handed back to AdoptOffline()
  std::string summary;
};

class PlanningAdapter {
 public:
  PlanningAdapter(const TopologyConfig& topology, const PlanningConfig& config);
  ~PlanningAdapter();
  PlanningAdapter(const PlanningAdapter&) = delete;
  PlanningAdapter& operator=(const PlanningAdapter&) = delete;

  // Incremental changes (the online planner's add/remove) and a full re-plan that keeps running
  // jobs still unless moving pays. Each bumps generation().
  void AddJob(const PlanJob& job);
  void RemoveJob(uint64_t id);
  // Adds or re-places several jobs at once, highest priority first; one that outranks a
  // planned neighbour is placed before it (the neighbours on its links are placed again around
  // it). Returns the jobs refused, with the reason; the others are planned. With `yield`, asked
  // after each job placed: once it says true, the batch's jobs not placed yet are left out and
  // listed in `deferred` (the caller plans them in its next round). With `yield` the batch also
  // ends before a group of jobs sharing links larger than any placed from (within a priority,
  // small groups go first): lone joins are not held behind a burst.
  std::vector<std::pair<uint64_t, std::string>> AddJobs(const std::vector<PlanJob>& batch,
                                                        const std::function<bool()>& yield = {},
                                                        std::vector<uint64_t>* deferred = nullptr);
  // Re-places a job whose window the controller's overrun rule widens (its phase_floor_ns).
  // Not taken when the job stays gated but its period grows by more than twice the widening:
  // the wider window no longer fits at its harmonic period. Then the plan is put back as it
  // was and the answer is false. Throws PlanningError for a job the planner refuses.
  bool WidenWindow(const PlanJob& job);
  // One planning round: `batch` (joins and re-plans) in one AddJobs, then each of `widen` (the
  // overrun rule's widenings) alone through WidenWindow; `yield` as in AddJobs (the widenings
  // wait too once it said true). What the round did not take:
  struct RoundOutcome {
    std::vector<std::pair<uint64_t, std::string>> refused;  // the planner refused the job (why)
    std::set<uint64_t> widen_refused;  // widenings not taken: they would stretch the period
    std::vector<uint64_t> deferred;    // left for the next round (yield)
  };
  RoundOutcome PlanRound(const std::vector<PlanJob>& batch, const std::vector<PlanJob>& widen,
                         const std::function<bool()>& yield = {});
  bool Contains(uint64_t id) const;
  // Where a previous leader ran its jobs (gated timetables by job name, offsets from the
  // configured epoch), until `until`: a batch with such a job is planned as a whole, each of
  // them treated as running where it ran (it stays there while that place is free, whatever
  // moving would gain), so that a scheduler that takes over leaves the jobs in their slots.
  // An entry is used once.
  void Inherit(std::map<std::string, Timetable> timetables,
               std::chrono::steady_clock::time_point until);

  // Moving planned jobs between adapters (the service plans the disjoint parts of a cluster in
  // adapters of their own). Extract takes jobs out, the others staying where they are; Import
  // puts them back in another adapter where they ran, without planning them again; Copy leaves
  // them here. The caller moves whole connected parts: a job imported onto a link that a job of
  // this adapter crosses would keep a window that may overlap that job's.
  struct PlannedJobs;  // opaque: the jobs as the planner has them and their plan entries
  std::shared_ptr<const PlannedJobs> Extract(const std::vector<uint64_t>& ids);
  std::shared_ptr<const PlannedJobs> Copy() const;
  void Import(const PlannedJobs& jobs);

  PlanSummary Summary() const;
  uint64_t Generation() const { return generation_; }
  // Topology queries (link_count, LinkNames, LinkCapacity, JobLinks) read only the topology,
  // which never changes after construction: safe from any thread while the planner runs.
  size_t LinkCount() const;
  std::vector<std::string> LinkNames() const;
  double LinkCapacity(size_t link) const;
  // The links a job crosses (indices into LinkNames()).
  std::vector<uint32_t> JobLinks(const PlanJob& job) const;

  // "If this job joined on these nodes": each affected job's slowdown now and after.
  // `names` maps the registry's job ids to names for the answer.
  std::vector<WhatIfEntry> WhatIf(const PlanJob& candidate,
                                  const std::map<uint64_t, std::string>& names) const;

  // Offline recalculation: Prepare under the caller's lock, Run without it (may take the whole
  // budget; `stop` ends it early; `max_iterations` > 0 caps the search instead, for a
  // reproducible run), Adopt under the lock: only a better plan, made from this generation,
  // that moves at most `max_moves` jobs.
  std::shared_ptr<OfflineTask> PrepareOffline() const;
  static OfflineResult RunOffline(const OfflineTask& task, int64_t budget_ms, std::stop_token stop,
                                  uint64_t max_iterations = 0);
  enum class Adoption : uint8_t { kApplied, kNoGain, kStale, kTooDisruptive, kRefused };
  Adoption AdoptOffline(const OfflineResult& result, size_t max_moves);

 private:
  struct Impl;
  struct Add;
  bool PlanInherited(const std::vector<Add>& adds,
                     std::vector<std::pair<uint64_t, std::string>>& refused);

  std::unique_ptr<Impl> impl_;
  uint64_t generation_ = 0;
};

// The weight π the planner gives a priority in its latency objective (stage 2) and its what-if.
double PriorityWeight(int priority);

// Raised by PlanningAdapter when the planner refuses a job (validate() found defects).
class PlanningError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace metronome::controller
