// The online planner (docs/planner.md): greedy, in priority order, fast enough to run on every
// change and inside the extender.
//
// For each job, highest priority first:
//   stage 1 (utilization, stage1_utilization.cpp): the smallest candidate period — P, then the
//     harmonic T_base·k, T_base/k — at which the job has a contention-free offset on every link
//     it crosses; none → best-effort (ungated at P, yielding to the windows ranked above it);
//   stage 2 (latency, stage2_latency.cpp): a stretch only when it costs less than running
//     ungated; a running job stays where it is unless moving gains more than the move costs;
//     a new job is packed against the windows already placed;
//   stage 3 (cushion, stage3_cushion.cpp): once all are placed, jobs free to move are slid
//     inside their free range so that the gaps after windows grow in proportion to priority.
// The interval structure behind "which offsets are free" is in occupancy.cpp, the harmonic
// period candidates in harmonic_periods.cpp. docs/planner.md states the cost of each step.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner {

namespace detail {
class Workspace;
}

// A one-shot plan. Jobs found in `current` are running: they keep their period and offset
// unless stage 2 says moving pays (or a higher-priority job now needs their place).
// Plan::jobs follows problem.jobs' order. Every entry point that takes jobs checks them first
// (validate() in model.hpp) and throws std::invalid_argument listing the defects.
[[nodiscard]] Plan MakePlan(const Problem& problem, const PlannerOptions& options = {},
                            const Plan* current = nullptr);

// What changed when one job arrived.
struct AddResult {
  JobPlan job;                 // the new job's entry
  std::vector<JobId> changed;  // running jobs whose period or offset changed to make room
};

// The stateful planner the daemon keeps: the whole plan, updated job by job.
// Not thread-safe, not even its const members (queries use scratch space): serialize all
// calls. The offline search builds its own state, so it can run in another thread on a copy
// of jobs() and snapshot().
class OnlinePlanner {
 public:
  explicit OnlinePlanner(Topology topology, PlannerOptions options = {});
  ~OnlinePlanner();
  OnlinePlanner(OnlinePlanner&&) noexcept;
  OnlinePlanner& operator=(OnlinePlanner&&) noexcept;

  // Replaces all jobs and plans them; jobs present in `current` are treated as running. With
  // `keep_running` a running job stays wherever its place is still free, whatever moving would
  // gain (a scheduler taking over keeps the jobs in the slots of the last plan).
  void PlanAll(const std::vector<Job>& jobs, const Plan* current = nullptr,
               bool keep_running = false);
  // Takes a plan as it is (e.g. the offline search's), without optimizing it.
  void Adopt(const std::vector<Job>& jobs, const Plan& plan);

  // Adds one job without re-planning the rest: it takes a free place if there is one; if not,
  // its equal- and lower-priority neighbours are packed again with it (when they are at most
  // 32); failing that, if it outranks jobs on its links, they are re-placed around it.
  AddResult AddJob(const Job& job);
  // Adds one job before its lower-priority neighbours: they leave its links, it is placed
  // among the jobs that outrank or equal it, and they are placed again around it, each where
  // it ran if that place is still free. Only the job's links are re-planned; jobs elsewhere
  // stay still.
  AddResult AddJobFirst(const Job& job);
  // AddJob and AddJobFirst without the new job's entry, whose contention evaluation of every
  // link the job crosses is a third of a burst of additions where many jobs share those links:
  // for a caller that reads the plan through Snapshot() (the service). Returns the running jobs
  // whose period or offset changed.
  std::vector<JobId> Insert(const Job& job);
  std::vector<JobId> InsertFirst(const Job& job);
  // Removes a job; the others stay still; best-effort or stretched jobs on its links are
  // re-examined (they may now fit or shrink their period), at most 32 of them in placement
  // order (the rest are the offline search's).
  void RemoveJob(JobId id);

  // The whole plan; jobs in no particular order (look them up with Plan::find).
  [[nodiscard]] Plan Snapshot() const;
  [[nodiscard]] std::vector<Job> Jobs() const;
  // The planned jobs other than `job` itself that use a link `job` crosses, in Jobs() order:
  // read from the links' occupants, not a pass over every job.
  [[nodiscard]] std::vector<Job> JobsSharingLinks(const Job& job) const;
  // The planned job with this id, as it was given (nullptr: none).
  [[nodiscard]] const Job* Find(JobId id) const;
  [[nodiscard]] const Topology& GetTopology() const;
  [[nodiscard]] const PlannerOptions& Options() const;
  [[nodiscard]] const detail::Workspace& GetWorkspace() const { return *ws_; }

 private:
  // An addition: the new job's index and the running jobs that moved (AddResult::changed).
  using Added = std::pair<std::uint32_t, std::vector<JobId>>;
  Added Add(const Job& job);
  Added AddFirst(const Job& job);
  Added FinishAdd(std::uint32_t j, const std::vector<std::uint32_t>& moved);
  [[nodiscard]] AddResult WithEntry(Added added) const;

  std::unique_ptr<detail::Workspace> ws_;
};

}  // namespace metronome::planner
