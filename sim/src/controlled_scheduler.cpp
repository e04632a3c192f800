// The simulator's Metronome: the scheduler service's controller and planning path, driven with
// what the service would hear from its shims. Nothing here decides anything the service does not.
//
//   - Each simulated job has a simulated shim: the shim's PhaseTracker, fed with the job's
//     phases (two all-reduce calls per phase, half of the gradient each), and a profile report
//     per rank every registry.report_interval_ms, filled by the shim's FillProfile, with the
//     gate's counters as the shim counts them (CountsLate).
//   - Each report goes to the controller's ApplyReport. Its verdicts are planned as the
//     service plans them (PlanningAdapter::PlanRound: every join and re-plan
//     of a round in one batch, each widening of the overrun rule alone); the plan becomes each
//     job's timetable through AdoptSchedule, and the simulated shims apply a push at once.
//   - The background recalculation runs every controller.offline_interval_ms, capped by
//     iterations rather than time so that a run is reproducible, and is adopted by the
//     service's rule (PlanningAdapter::AdoptOffline).
//   - The gate decides with the shim's DecideRankedGate and MustRealign (simulator.cpp), and
//     holds a job only while the shim's MayGate (rhythm.hpp) says its rhythm is stable, judged
//     at each report as the shim's background thread judges it.
// The service runs on its embedded defaults but for planning.wire_margin (0: see ConfigFor); a
// policy's ablation switches change only the keys they name (planning.cushion,
// planning.max_stretch, controller.overrun_ratio).
#include <algorithm>
#include <chrono>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "metronome/common/protocol.hpp"
#include "metronome/controller/config.hpp"
#include "metronome/controller/job_state.hpp"
#include "metronome/controller/observer_yields.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/controller/rules.hpp"
#include "metronome/controller/turns.hpp"
#include "metronome/sim/time_scheduler.hpp"
#include "phase_tracker.hpp"
#include "profile_report.hpp"
#include "rhythm.hpp"

namespace metronome::sim {

namespace {

namespace ctl = metronome::controller;

// The parts of the service's configuration its controller reads.
struct Settings {
  ctl::RegistryConfig registry;
  ctl::PlanningConfig planning;
  ctl::TimetableConfig timetable;
  ctl::ControllerConfig controller;
};

// The service's configuration for a policy: its embedded defaults, but for the ablations.
Settings ConfigFor(const PolicyConfig& policy) {
  Settings c;
  // The fluid model delivers a link's whole capacity to its flows: no framing or protocol
  // overhead for the margin to cover (on a real link it is what TCP or InfiniBand take).
  c.planning.wire_margin = 0.0;
  c.planning.cushion = policy.cushion;
  if (policy.max_stretch > 0) c.planning.max_stretch = policy.max_stretch;
  if (!policy.stretch) c.planning.max_stretch = 1.0;
  if (!policy.overrun) c.controller.overrun_ratio = 0.0;
  return c;
}

// A candidate placement's what-if id: never a running job's (those are scenario indices).
constexpr std::uint64_t kWhatIfId = ~std::uint64_t{0};

class ControlledScheduler final : public TimeScheduler {
 public:
  ControlledScheduler(const PolicyConfig& policy, const Cluster& cluster, std::size_t job_count)
      : policy_(policy),
        cluster_(cluster),
        config_(ConfigFor(policy)),
        planner_(cluster.topology, config_.planning),
        entries_(job_count) {
    if (planner_.LinkCount() != cluster.links.size()) {
      throw std::logic_error("simulated scheduler: the topology's links differ from the cluster's");
    }
    for (const Cluster::Link& l : cluster.links) link_capacity_[l.name] = l.capacity_bytes_per_s;
  }

  void JobStarted(const ActiveJob& a, std::int64_t now_ns) override {
    if (a.links.empty()) return;  // inside one node: nothing to schedule
    Entry& e = entries_[a.index];
    e = Entry();
    e.active = true;
    e.view = a;
    ctl::JobState& job = e.job;
    job.name = "job" + std::to_string(a.index);
    job.id = a.index;
    job.priority = a.priority;
    job.world_size = static_cast<std::uint32_t>(a.rank_nodes.size());
    job.created_ns = now_ns;
    for (const std::uint32_t l : a.links) job.links.push_back(cluster_.links[l].name);
    for (std::uint32_t r = 0; r < a.rank_nodes.size(); ++r) {
      ctl::RankState& rank = job.ranks[r];
      rank.rank = r;
      rank.node = cluster_.nodes[a.rank_nodes[r]].name;
      rank.registered_ns = rank.last_seen_ns = now_ns;
    }
    e.next_report_ns = now_ns + ReportInterval();
    active_.push_back(a.index);
    turns_refresh_.JobsChanged();
    RefreshObservers(now_ns);
    RefreshTurnsIfDue(now_ns);
  }

  void JobFinished(std::size_t index, std::int64_t now_ns) override {
    Entry& e = entries_[index];
    if (!e.active) return;
    e.active = false;
    active_.erase(std::find(active_.begin(), active_.end(), index));
    turns_refresh_.JobsChanged();
    // Without the controller nobody notices that the job left: its windows stay reserved.
    if (policy_.controller && e.job.planned) {
      Timed([&] { planner_.RemoveJob(e.job.id); });
      ++stats_.removes;
      ApplyPlan(now_ns);
    }
    RefreshTurnsIfDue(now_ns);
  }

  void IterationDone(std::size_t index, const IterationObservation& obs,
                     std::int64_t now_ns) override {
    if (policy_.controller && now_ns >= next_offline_ns_) {
      Offline(now_ns);
      RefreshTurnsIfDue(now_ns);
    }
    Entry& e = entries_[index];
    if (!e.active) return;
    Shim(e, obs, now_ns);
    if (now_ns < e.next_report_ns) return;
    e.next_report_ns = now_ns + ReportInterval();
    // Every rank's shim has seen the same phases (one tracker stands for them all): one report,
    // rank by rank.
    const shim::PhaseEstimate estimate = e.tracker.Estimate();
    const bool may_gate = shim::MayGate(estimate);  // as the shim's background thread decides
    if (may_gate != e.may_gate) ++yields_version_;
    e.may_gate = may_gate;
    proto::ProfileReport report;
    report.job_id = e.job.name;
    shim::FillProfile(e.tracker, estimate, 0, report);
    report.clock_error_ns = cluster_.clock_error_ns;
    report.timetable_version = e.job.timetable.version;
    report.gated = e.gated;
    report.late = e.late;
    report.failed_open = e.failed_open;
    report.realigned = e.realigned;
    for (auto& [r, rank] : e.job.ranks) {
      report.rank = rank.rank;
      Report(e, report, rank, now_ns);
    }
    if (e.job.has_profile) turns_refresh_.ProfilesMoved();
    if (!pending_.empty()) PlanRound(now_ns);
    RefreshTurnsIfDue(now_ns);
  }

  // A job not planned yet has a timetable only while it yields (AdoptObserverYields).
  [[nodiscard]] const Timetable* GateTimetable(std::size_t index) override {
    const Entry& e = entries_[index];
    if (!e.active || !e.may_gate || e.job.timetable.version == 0) return nullptr;
    return &e.job.timetable;
  }
  [[nodiscard]] const YieldSet* GateYields(std::size_t index) const override {
    const Entry& e = entries_[index];
    if (!e.active || !e.may_gate || e.gate_yields.count == 0) return nullptr;
    if (!policy_.yields) return nullptr;
    return &e.gate_yields;
  }
  [[nodiscard]] std::uint64_t YieldsVersion() const override { return yields_version_; }
  // Whom the job takes turns with on the links it and one other running job cross, from the
  // controller's registry entries, as the service pushes them (Registry::RefreshTurns).
  // Held, like any hold, only while the shim's MayGate says its rhythm is stable.
  [[nodiscard]] const TurnSet* GateTurns(std::size_t index) override {
    if (policy_.turn_relay_ms < 0) return nullptr;
    const Entry& e = entries_[index];
    if (!e.active || !e.may_gate || e.turns.count == 0) return nullptr;
    return &e.turns;
  }
  [[nodiscard]] const Timetable* CurrentTimetable(std::size_t index) const override {
    const Entry& e = entries_[index];
    return e.job.planned && !AlwaysOpen(e.job.timetable) ? &e.job.timetable : nullptr;
  }
  [[nodiscard]] bool BestEffort(std::size_t index) const override {
    return entries_[index].job.best_effort;
  }
  [[nodiscard]] SchedulerStats Stats() const override { return stats_; }

  // The service's what-if for each candidate: cost = π·(the job's iteration time under the
  // candidate relative to its best natural period − 1) + Σ π·(extra slowdown of its neighbours),
  // and a prohibitive cost when it would break a higher-priority job's timetable (the
  // extender's filter).
  [[nodiscard]] std::vector<double> ScorePlacements(
      const std::vector<ActiveJob>& candidates) override {
    std::vector<double> cost(candidates.size(), 0.0);
    std::int64_t best_period = 0;
    for (const ActiveJob& a : candidates) {
      const std::int64_t p = a.compute_ns + a.comm_ns;
      if (best_period == 0 || p < best_period) best_period = p;
    }
    Timed([&] {
      for (std::size_t i = 0; i < candidates.size(); ++i) {
        const ActiveJob& a = candidates[i];
        const double weight = ctl::PriorityWeight(a.priority);
        const double period = static_cast<double>(a.compute_ns + a.comm_ns);
        const double base = period / static_cast<double>(best_period) - 1.0;
        if (a.links.empty()) {
          cost[i] = weight * base;
          continue;
        }
        std::vector<ctl::WhatIfEntry> r;
        try {
          r = planner_.WhatIf(Candidate(a), {});
        } catch (const ctl::PlanningError&) {
          // The planner refuses the candidate (as the extender would): scored by its own pace.
          ++stats_.placements_refused;
        }
        if (r.empty()) {
          cost[i] = weight * base;
          continue;
        }
        cost[i] = weight * ((1.0 + base) * (1.0 + r.front().slowdown_after) - 1.0) +
                  r.front().neighbour_slowdown + (r.front().hurts_higher_priority ? 1e6 : 0.0);
      }
    });
    ++stats_.placements_scored;
    return cost;
  }

 private:
  struct Entry {
    bool active = false;
    ActiveJob view;
    ctl::JobState job;     // the service's registry entry for the job
    YieldSet gate_yields;  // job.yields as its shims keep them (Deliver)
    TurnSet turns;         // whom it takes turns with (RefreshTurns)
    shim::PhaseTracker tracker{};
    bool may_gate = true;  // the shim's rule (rhythm.hpp): no stable rhythm, never held
    std::uint64_t gated = 0, late = 0, failed_open = 0, realigned = 0;  // the shim's counters
    std::int64_t next_report_ns = 0;
  };
  struct Pending {
    std::uint64_t id;
    bool overrun;  // a widening (tried alone)
    bool replan;
  };

  std::int64_t ReportInterval() const {
    return static_cast<std::int64_t>(config_.registry.report_interval_ms) * 1'000'000;
  }

  // What the job's shims see of the phase that just ended: its collectives and the gate's verdict.
  void Shim(Entry& e, const IterationObservation& obs, std::int64_t now_ns) {
    const std::int64_t start = now_ns - obs.comm_ns;
    const std::int64_t mid = start + obs.comm_ns / 2;
    const auto half = static_cast<std::uint64_t>(e.view.gradient_bytes / 2);
    // As the shim records them: the phase's first collective carries the gate's hold, a later
    // one the yields' pauses before it.
    e.tracker.Add({start, mid, 0, half, obs.hold_ns});
    e.tracker.Add({mid, now_ns, 0, half, obs.pause_ns});
    if (obs.waited) ++e.gated;
    if (obs.late) ++e.late;
    if (obs.failed_open) ++e.failed_open;
    if (obs.realigned) ++e.realigned;
  }

  // One rank's profile report `r`, as the service handles it (Service::HandleReport).
  void Report(Entry& e, const proto::ProfileReport& r, ctl::RankState& rank, std::int64_t now_ns) {
    const ctl::ReportVerdict v =
        ctl::ApplyReport(e.job, rank, r, config_.controller, config_.planning, now_ns,
                         [this](const ctl::JobState& job) {
                           std::vector<const ctl::JobState*> above;
                           for (const Entry& other : entries_) {
                             if (other.active && ctl::OutranksOnSharedLink(other.job, job)) {
                               above.push_back(&other.job);
                             }
                           }
                           return above;
                         });
    if (!v.overrun_deferred_to.empty()) ++stats_.overrun_deferred;
    if (v.first_profile) pending_.push_back({e.job.id, false, false});
    if (v.decision == ctl::Decision::kNone || !policy_.controller) return;
    e.job.last_replan_ns = now_ns;
    pending_.push_back({e.job.id, v.decision == ctl::Decision::kReplanOverrun, true});
    ++stats_.controller_replans;
    if (v.decision == ctl::Decision::kReplanOverrun) ++stats_.overrun_replans;
  }

  // One round of the service's planning worker (PlanningWorker::RunRound) for the queued changes.
  void PlanRound(std::int64_t now_ns) {
    std::vector<ctl::PlanJob> batch;
    std::vector<ctl::PlanJob> widen;
    std::set<std::uint64_t> seen;
    for (const Pending& p : pending_) {
      const Entry& e = entries_[p.id];
      if (!e.active || !e.job.has_profile || !seen.insert(p.id).second) continue;
      (p.overrun ? widen : batch).push_back(ctl::ToPlanJob(e.job, now_ns));
      if (!p.replan) ++stats_.adds;
    }
    pending_.clear();
    ctl::PlanningAdapter::RoundOutcome round;
    Timed([&] { round = planner_.PlanRound(batch, widen); });
    std::set<std::uint64_t> refused;
    for (const auto& [id, why] : round.refused) refused.insert(id);
    for (const std::vector<ctl::PlanJob>* list : {&batch, &widen}) {
      for (const ctl::PlanJob& j : *list) {
        Entry& e = entries_[j.id];
        if (refused.contains(j.id)) continue;
        if (round.widen_refused.contains(j.id)) {
          ctl::RecordWidenRefused(e.job, j);
          ++stats_.overrun_refused;
          continue;
        }
        ctl::RecordPlanned(e.job, j);
      }
    }
    ++stats_.plans;
    ApplyPlan(now_ns);
  }

  // The plan's timetables to the jobs (Service::ApplyPlan); a simulated shim applies a push at
  // once.
  void ApplyPlan(std::int64_t now_ns) {
    ++yields_version_;
    const ctl::PlanSummary plan = planner_.Summary();
    for (const ctl::JobSchedule& s : plan.jobs) {
      if (s.id >= entries_.size() || !entries_[s.id].active) continue;
      uint32_t check = 0;
      const bool was_held = ctl::HeldToAWindow(entries_[s.id].job);
      if (ctl::AdoptSchedule(entries_[s.id].job, s, config_.timetable, check)) {
        Deliver(entries_[s.id], now_ns);
      }
      if (ctl::HeldToAWindow(entries_[s.id].job) != was_held) turns_refresh_.JobsChanged();
    }
    RefreshObservers(now_ns);
  }

  // The jobs not planned yet yield to the gated windows of higher priority on their links, as
  // the service pushes them (Registry::RefreshObservers). The index holds only the planned jobs
  // that share a link with one of them.
  void RefreshObservers(std::int64_t now_ns) {
    observer_link_.assign(cluster_.links.size(), 0);
    bool any = false;
    for (const std::size_t i : active_) {
      const Entry& e = entries_[i];
      if (e.job.planned) continue;
      any = true;
      for (const std::uint32_t l : e.view.links) observer_link_[l] = 1;
    }
    if (!any) return;
    ctl::GatedJobsByLink gated;
    for (const std::size_t i : active_) {
      const Entry& e = entries_[i];
      if (!e.job.planned) continue;
      for (const std::uint32_t l : e.view.links) {
        if (observer_link_[l] != 0) {
          gated.Add(e.job);
          break;
        }
      }
    }
    for (const std::size_t i : active_) {
      Entry& e = entries_[i];
      if (e.job.planned) continue;
      if (ctl::AdoptObserverYields(e.job, gated.YieldsFor(e.job.priority, e.job.links),
                                   config_.timetable)) {
        Deliver(e, now_ns);
        ++yields_version_;
      }
    }
  }

  // At the moments the service's tick would (controller::TurnsRefresh).
  void RefreshTurnsIfDue(std::int64_t now_ns) {
    if (policy_.turn_relay_ms < 0 || !turns_refresh_.Due(now_ns)) return;
    turns_refresh_.Refreshed(now_ns);
    std::unordered_map<std::uint64_t, double> pace;  // each job's pace alone, by id
    for (const std::size_t i : active_) {
      pace[entries_[i].job.id] = entries_[i].view.beta_bytes_per_s;
    }
    ctl::TwoJobLinks links(link_capacity_,
                           [&](const ctl::JobState& job, std::span<const std::string>) {
                             return ctl::FiguresForTurns(job, pace.at(job.id), config_.planning);
                           });
    for (const std::size_t i : active_) links.Add(entries_[i].job, entries_[i].job.links);
    for (const std::size_t i : active_) {
      Entry& e = entries_[i];
      const TurnSet t = links.TurnsFor(e.job);
      if (ctl::TurnsMoved(t, e.turns)) e.turns = t;  // as the service pushes a set that moved
    }
  }

  // A push the job's shims adopt (Client::Adopt): its yields with their epoch moved to the clock.
  static void Deliver(Entry& e, std::int64_t now_ns) {
    e.gate_yields = e.job.yields;
    RebaseYieldSet(e.gate_yields, now_ns);
  }

  // The service's background recalculation (Service::OfflineLoop), at its interval.
  void Offline(std::int64_t now_ns) {
    next_offline_ns_ = now_ns + config_.controller.offline_interval_ms * 1'000'000;
    if (policy_.offline_iterations <= 0) return;
    const ctl::PlanSummary plan = planner_.Summary();
    if (plan.jobs.size() < 2) return;
    const std::uint64_t iterations = static_cast<std::uint64_t>(
        std::max<long>(2, static_cast<long>(policy_.offline_iterations) * 50 /
                              static_cast<long>(std::max<std::size_t>(50, plan.jobs.size()))));
    ctl::PlanningAdapter::Adoption adopted = ctl::PlanningAdapter::Adoption::kNoGain;
    Timed([&] {
      const auto task = planner_.PrepareOffline();
      const ctl::OfflineResult r =
          ctl::PlanningAdapter::RunOffline(*task, /*budget_ms=*/3'600'000, {}, iterations);
      adopted = planner_.AdoptOffline(r, config_.controller.offline_max_moves);
    });
    ++stats_.offline_runs;
    if (adopted != ctl::PlanningAdapter::Adoption::kApplied) return;
    ++stats_.offline_adopted;
    ApplyPlan(now_ns);
  }

  // A job about to be placed, as the extender would ask about it: its natural profile.
  ctl::PlanJob Candidate(const ActiveJob& a) const {
    ctl::PlanJob j;
    j.id = kWhatIfId;
    j.name = "candidate";
    j.priority = a.priority;
    for (std::uint32_t n : a.rank_nodes) j.nodes.push_back(cluster_.nodes[n].name);
    j.profile.comm_ns = a.comm_ns;
    j.profile.period_ns = a.compute_ns + a.comm_ns;
    j.profile.compute_ns = a.compute_ns;
    j.profile.min_comm_ns = a.comm_ns;
    j.profile.jitter_ns = a.jitter_ns;
    j.profile.bytes_per_phase = static_cast<std::uint64_t>(a.gradient_bytes);
    return j;
  }

  template <class F>
  void Timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    stats_.planner_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  PolicyConfig policy_;
  Cluster cluster_;
  Settings config_;
  ctl::PlanningAdapter planner_;
  std::vector<Entry> entries_;
  std::vector<Pending> pending_;
  std::int64_t next_offline_ns_ = 0;
  std::uint64_t yields_version_ = 0;                       // YieldsVersion
  ctl::TurnsRefresh turns_refresh_;                        // when the turn sets are computed again
  std::unordered_map<std::string, double> link_capacity_;  // by name, as the plan has them
  std::vector<std::size_t> active_;                        // the entries of the running jobs
  std::vector<char> observer_link_;  // RefreshObservers: links an unplanned job crosses
  SchedulerStats stats_;
};

}  // namespace

std::unique_ptr<TimeScheduler> MakeControlledScheduler(const PolicyConfig& policy,
                                                       const Cluster& cluster,
                                                       std::size_t job_count) {
  return std::make_unique<ControlledScheduler>(policy, cluster, job_count);
}

}  // namespace metronome::sim
