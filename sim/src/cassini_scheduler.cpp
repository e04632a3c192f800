// The CASSINI baseline (docs/simulator.md): the planner library's plan_cassini places every job's
// phase once, when the set of jobs changes, and each job is shifted into its slot once per new
// plan and otherwise runs freely: no per-iteration gate, no stop-and-wait, no controller.
// Metronome's own policies run the scheduler service's code instead (controlled_scheduler.cpp).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "metronome/planner/baselines.hpp"
#include "metronome/planner/planner.hpp"
#include "metronome/sim/time_scheduler.hpp"

namespace metronome::sim {

std::unique_ptr<TimeScheduler> MakeControlledScheduler(const PolicyConfig& policy,
                                                       const Cluster& cluster,
                                                       std::size_t job_count);

namespace {

namespace pl = metronome::planner;

class CassiniScheduler final : public TimeScheduler {
 public:
  CassiniScheduler(const Cluster& cluster, std::size_t job_count)
      : topology_(*cluster.network), entries_(job_count) {}

  void JobStarted(const ActiveJob& a, std::int64_t /*now_ns*/) override {
    if (a.links.empty()) return;  // inside one node: nothing to schedule
    Entry& e = entries_[a.index];
    e.active = true;
    e.job.id = a.index;
    e.job.priority = a.priority;
    e.job.nodes.assign(a.nodes.begin(), a.nodes.end());
    e.job.profile.comm_ns = a.comm_ns;
    e.job.profile.period_ns = pl::RoundUpPeriod(a.compute_ns + a.comm_ns, 1'000'000);
    e.job.profile.beta_bps = a.beta_bytes_per_s;
    e.job.profile.jitter_ns = std::min(a.jitter_ns, e.job.profile.period_ns);
    active_.push_back(a.index);
    Replan();
  }

  void JobFinished(std::size_t index, std::int64_t /*now_ns*/) override {
    Entry& e = entries_[index];
    if (!e.active) return;
    e.active = false;
    e.has_tt = false;
    std::erase(active_, index);
    Replan();
  }

  void IterationDone(std::size_t, const IterationObservation&, std::int64_t) override {}

  [[nodiscard]] const Timetable* GateTimetable(std::size_t index) override {
    Entry& e = entries_[index];
    if (!e.has_tt || e.tt.version == e.consumed_version) return nullptr;
    // Once per new slot: the phase waits for its window, up to a period (the shift).
    e.consumed_version = e.tt.version;
    e.shift_tt = e.tt;
    e.shift_tt.max_wait_ns = e.tt.period_ns;
    (void)ValidateTimetable(e.shift_tt);
    return &e.shift_tt;
  }
  [[nodiscard]] const Timetable* CurrentTimetable(std::size_t index) const override {
    const Entry& e = entries_[index];
    return e.has_tt && !AlwaysOpen(e.tt) ? &e.tt : nullptr;
  }
  [[nodiscard]] bool BestEffort(std::size_t index) const override {
    return entries_[index].best_effort;
  }
  [[nodiscard]] SchedulerStats Stats() const override { return stats_; }
  [[nodiscard]] std::vector<double> ScorePlacements(
      const std::vector<ActiveJob>& candidates) override {
    return std::vector<double>(candidates.size(), 0.0);  // CASSINI places by its own affinity
  }

 private:
  struct Entry {
    bool active = false;
    pl::Job job;
    bool has_tt = false;
    bool best_effort = false;
    Timetable tt;
    Timetable shift_tt;
    std::uint64_t consumed_version = 0;
  };

  void Replan() {
    pl::Problem problem;
    problem.topology = topology_;
    for (std::size_t i : active_) problem.jobs.push_back(entries_[i].job);
    const auto t0 = std::chrono::steady_clock::now();
    const pl::Plan plan = pl::PlanCassini(problem);
    stats_.planner_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats_.plans;
    for (const pl::JobPlan& jp : plan.jobs) {
      Entry& e = entries_.at(jp.id);
      if (!e.active) continue;
      Timetable tt = jp.timetable;
      tt.epoch_ns = plan.epoch_ns;
      tt.version = e.tt.version;
      e.best_effort = jp.best_effort;
      if ((ValidateTimetable(tt) & kTimetableRejectMask) != 0) {
        e.has_tt = false;
        continue;
      }
      if (!e.has_tt || tt != e.tt) ++tt.version;  // a new slot: shift into it once
      e.tt = tt;
      e.has_tt = true;
    }
  }

  pl::Topology topology_;
  std::vector<Entry> entries_;
  std::vector<std::size_t> active_;
  SchedulerStats stats_;
};

}  // namespace

std::unique_ptr<TimeScheduler> MakeTimeScheduler(const PolicyConfig& policy, const Cluster& cluster,
                                                 std::size_t job_count) {
  switch (policy.scheduling) {
    case SchedulingKind::kNone:
      return nullptr;
    case SchedulingKind::kCassini:
      return std::make_unique<CassiniScheduler>(cluster, job_count);
    case SchedulingKind::kMetronome:
      break;
  }
  return MakeControlledScheduler(policy, cluster, job_count);
}

}  // namespace metronome::sim
