// The one place where the simulator meets the planner library (scheduler/planner): it turns the
// simulated cluster and jobs into the planner's Problem, keeps the plan current as jobs come
// and go (and, with the controller, as their measured profiles drift), and hands each job's
// gate the timetable the plan gives it. It implements no planning of its own.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "metronome/controller/overrun.hpp"
#include "metronome/planner/baselines.h"
#include "metronome/planner/offline.h"
#include "metronome/planner/planner.h"
#include "metronome/planner/what_if.h"
#include "metronome/sim/time_scheduler.hpp"

namespace metronome::sim {

namespace {

namespace pl = metronome::planner;
namespace ctl = metronome::controller;

// The controller's drift watch (docs/simulator.md): every kWindow iterations, the mean measured
// compute phase of the last kWindow iterations is compared with the profile the plan was made
// for; a difference beyond kTolerance of the period (and beyond 4 standard errors of the mean,
// so that jitter alone does not trigger it) re-plans the job with the measured mean. Repeated
// fail-opens (phases later than their slack) with a measured jitter above the planned one
// re-plan it with the measured jitter (a larger cushion).
constexpr std::size_t kWindow = 16;
constexpr double kTolerance = 0.02;
constexpr double kJitterGrowth = 1.25;
// Overrun: the service's rule (controller/overrun.hpp, with its default ratio) judged on the
// median of the last kWindow phases; a widening that would stretch the job's period is not
// taken (WideningStretches).
// Periods are planned on a grid, rounded up, as the scheduler service does: periods measured to
// the nanosecond are almost never commensurate, and the planner interleaves by gcd. The grid is
// 1 ms, finer for periods under 100 ms (pl::round_up_period: never more than 1 % of the period).
constexpr std::int64_t kPeriodGrid = 1'000'000;

std::int64_t Median(const std::deque<std::int64_t>& xs) {
  if (xs.empty()) return 0;
  std::vector<std::int64_t> v(xs.begin(), xs.end());
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

std::int64_t RoundUpToGrid(std::int64_t ns) {
  return pl::round_up_period(ns, kPeriodGrid);
}

// The profile the scheduler learns of a job from its first iterations (the shim's report).
pl::JobProfile ProfileOf(const ActiveJob& a) {
  pl::JobProfile p;
  p.comm_ns = a.comm_ns;
  p.period_ns = RoundUpToGrid(a.compute_ns + a.comm_ns);
  p.beta_bps = a.beta_Bps;
  p.jitter_ns = std::min(a.jitter_ns, p.period_ns);
  return p;
}

class PlannerScheduler final : public TimeScheduler {
 public:
  PlannerScheduler(const PolicyConfig& policy, const Cluster& cluster, std::size_t job_count)
      : policy_(policy), entries_(job_count) {
    for (const Cluster::Rack& rack : cluster.racks) {
      const pl::LinkId up = topology_.add_link(cluster.links[rack.uplink].name,
                                               cluster.links[rack.uplink].capacity_Bps);
      if (up != rack.uplink) throw std::logic_error("planner adapter: link numbering differs");
      const pl::RackId r = topology_.add_rack(rack.name, up);
      for (std::uint32_t n : rack.nodes) {
        const Cluster::Node& node = cluster.nodes[n];
        const pl::LinkId nl = topology_.add_link(cluster.links[node.uplink].name,
                                                 cluster.links[node.uplink].capacity_Bps);
        if (nl != node.uplink) throw std::logic_error("planner adapter: link numbering differs");
        const pl::NodeId id = topology_.add_node(node.name, r, nl);
        if (id != n) throw std::logic_error("planner adapter: node numbering differs");
      }
    }
    if (!policy_.cushion) options_.cushion = false;
    // The least cushion between windows: what the nodes' clocks may disagree by.
    options_.min_cushion_ns = cluster.clock_error_ns;
    if (policy_.max_stretch > 0) options_.max_stretch = policy_.max_stretch;
    if (!policy_.stretch) options_.max_stretch = 1.0;
    if (policy_.scheduling == SchedulingKind::kMetronome) {
      online_.emplace(topology_, options_);
    }
  }

  void JobStarted(const ActiveJob& a, std::int64_t now_ns) override {
    if (a.links.empty()) return;  // inside one node: nothing to schedule
    Entry& e = entries_[a.index];
    e.active = true;
    e.job.id = a.index;
    e.job.priority = a.priority;
    e.job.nodes.assign(a.nodes.begin(), a.nodes.end());
    e.job.profile = ProfileOf(a);
    e.comm_ns = a.comm_ns;
    e.base_comm_ns = a.comm_ns;
    e.compute_ns = a.compute_ns;
    // Its first phase comes after its launch and first compute phase: the window opens there.
    e.job.next_phase_ns = now_ns + a.start_delay_ns + a.compute_ns;
    if (online_) {
      Timed([&] { (void)online_->add_job(e.job); });
      ++stats_.adds;
      Offline(now_ns);
      Refresh(online_->snapshot());
    } else {
      active_.push_back(a.index);
      ReplanCassini();
    }
  }

  void JobFinished(std::size_t index, std::int64_t now_ns) override {
    Entry& e = entries_[index];
    if (!e.active) return;
    e.active = false;
    e.has_tt = false;
    if (online_) {
      // Without the controller nobody notices that the job left: its windows stay reserved.
      if (!policy_.controller) return;
      Timed([&] { online_->remove_job(index); });
      ++stats_.removes;
      Offline(now_ns);
      Refresh(online_->snapshot());
    } else {
      std::erase(active_, index);
      ReplanCassini();
    }
  }

  void IterationDone(std::size_t index, const IterationObservation& obs,
                     std::int64_t now_ns) override {
    if (offline_pending_ && now_ns - last_offline_ns_ >= kOfflineSpacingNs) {
      Offline(now_ns);  // a search that was due but too soon after the last one
      Refresh(online_->snapshot());
    }
    Entry& e = entries_[index];
    if (!online_ || !policy_.controller || !e.active) return;
    e.recent_compute.push_back(obs.compute_ns);
    if (e.recent_compute.size() > kWindow) e.recent_compute.pop_front();
    ++e.phases_under_tt;
    e.recent_comm.push_back(obs.comm_ns);
    if (e.recent_comm.size() > kWindow) e.recent_comm.pop_front();
    if (obs.failed_open) ++e.fail_opens;
    if (++e.since_plan < kWindow) return;
    e.since_plan = 0;  // one check per window of fresh iterations
    double mean = 0;
    for (std::int64_t c : e.recent_compute) mean += static_cast<double>(c);
    const double n = static_cast<double>(e.recent_compute.size());
    mean /= n;
    double var = 0;
    for (std::int64_t c : e.recent_compute) {
      var += (static_cast<double>(c) - mean) * (static_cast<double>(c) - mean);
    }
    const double sigma = std::sqrt(var / std::max(1.0, n - 1.0));
    const double std_error = sigma / std::sqrt(n);
    // The compute phase the plan assumes (before its period was rounded up to the grid).
    const double planned = static_cast<double>(e.compute_ns);
    const double period = static_cast<double>(e.job.profile.period_ns);
    // Drift: beyond the tolerance and beyond what jitter alone explains (4 standard errors).
    const bool drifted = std::abs(mean - planned) > std::max(kTolerance * period, 4 * std_error);
    // Late beyond the slack more than once, with more jitter than planned: a larger cushion.
    // (A best-effort job's window has no cushion to grow.)
    const bool jittery = !e.best_effort && e.fail_opens >= 2 &&
                         sigma > kJitterGrowth * static_cast<double>(e.job.profile.jitter_ns);
    e.fail_opens = 0;
    // Overrun: the window follows what the phases take (the median of the last kWindow), but
    // never below the wire time. Judged only on phases run under the current timetable (as the
    // service does).
    const std::int64_t phase = Median(e.recent_comm);
    const bool settled = e.phases_under_tt >= kWindow;
    const bool gated = policy_.overrun && e.has_tt && !e.best_effort && !AlwaysOpen(e.tt);
    const ctl::OverrunMove move =
        settled ? ctl::JudgeOverrun({phase, e.comm_ns, gated, e.refused_window_ns,
                                     e.comm_ns > e.base_comm_ns ? e.comm_ns : 0},
                                    ctl::kDefaultOverrunRatio)
                : ctl::OverrunMove::kNone;
    std::int64_t window = e.comm_ns;
    if (move == ctl::OverrunMove::kWiden) {
      window = phase;
    } else if (move == ctl::OverrunMove::kNarrow) {
      window = std::max(e.base_comm_ns, phase);
    }
    const bool overran = window != e.comm_ns;
    const bool widened = window > e.comm_ns;
    const std::int64_t old_comm = e.comm_ns;
    const pl::JobProfile old_profile = e.job.profile;
    if (overran) {
      e.comm_ns = window;
      e.job.profile.comm_ns = window;
      e.job.profile.period_ns = RoundUpToGrid(e.compute_ns + e.comm_ns);
    }
    if (!drifted && !jittery && !overran) return;
    if (drifted) {
      e.compute_ns = std::llround(mean);
      e.job.profile.period_ns = RoundUpToGrid(e.compute_ns + e.comm_ns);
    }
    if (jittery) {
      e.job.profile.jitter_ns =
          std::min<std::int64_t>(std::llround(sigma), e.job.profile.period_ns);
    }
    e.since_plan = 0;
    e.job.next_phase_ns = now_ns + e.compute_ns;  // this iteration just ended
    // Re-plan the job with its measured profile: it leaves and comes back (add_job), so that
    // it takes a free place, or its equal- and lower-priority neighbours are packed again with
    // it; the offline search below may improve on that.
    const bool widening_only = widened && !drifted && !jittery;
    std::vector<pl::Job> jobs_before;
    pl::Plan plan_before;
    if (widening_only) {
      jobs_before = online_->jobs();
      plan_before = online_->snapshot();
    }
    Timed([&] { (void)online_->add_job(e.job); });
    if (widening_only && WideningStretches(plan_before, e.job.id)) {
      Timed([&] { online_->adopt(jobs_before, plan_before); });  // the plan as it was
      e.comm_ns = old_comm;  // its phases overrun the window as before
      e.job.profile = old_profile;
      e.refused_window_ns = window;
      ++stats_.overrun_refused;
      return;
    }
    ++stats_.drift_replans;
    if (overran) ++stats_.overrun_replans;
    Offline(now_ns);
    Refresh(online_->snapshot());
  }

  [[nodiscard]] const Timetable* GateTimetable(std::size_t index) override {
    Entry& e = entries_[index];
    if (!e.has_tt) return nullptr;
    // An always-open timetable is handed to the gate like any other: the gate decision
    // (DecideGate) lets its phases go, as the shim's does.
    if (e.best_effort && !policy_.gate_best_effort) return nullptr;
    if (policy_.scheduling == SchedulingKind::kCassini) {
      // CASSINI shifts a job in time once, when its placement or shift changes, and otherwise
      // lets it run freely: no per-iteration gate, no stop-and-wait.
      if (e.tt.version == e.consumed_version) return nullptr;
      e.consumed_version = e.tt.version;
      e.align = true;
    }
    if (e.align) {
      // The first phase under a moved slot enters it at its window: the job's phase has nothing
      // to do with the new slot yet, so a phase that comes "late" is not late but misaligned,
      // and going at once would collide with the neighbour the slot was placed against (and
      // make it late in turn). This one phase may wait up to a period; the next ones use the
      // planner's max wait (period − window).
      e.align = false;
      e.align_tt = e.tt;
      e.align_tt.max_wait_ns = e.tt.period_ns;
      (void)ValidateTimetable(e.align_tt);
      return &e.align_tt;
    }
    return &e.tt;
  }
  [[nodiscard]] const Timetable* CurrentTimetable(std::size_t index) const override {
    const Entry& e = entries_[index];
    return e.has_tt && e.tt.window_ns < e.tt.period_ns ? &e.tt : nullptr;
  }
  [[nodiscard]] bool BestEffort(std::size_t index) const override {
    return entries_[index].best_effort;
  }
  [[nodiscard]] SchedulerStats Stats() const override { return stats_; }

  // The planner's what-if for each candidate: cost = π·(the job's iteration time under the
  // candidate relative to its best natural period − 1) + Σ π·(extra slowdown of its neighbours),
  // and a prohibitive cost when it would break a higher-priority job's timetable (the
  // extender's filter).
  [[nodiscard]] std::vector<double> ScorePlacements(
      const std::vector<ActiveJob>& candidates) override {
    std::vector<double> cost(candidates.size(), 0.0);
    if (!online_) return cost;
    std::int64_t best_period = 0;
    for (const ActiveJob& a : candidates) {
      const std::int64_t p = a.compute_ns + a.comm_ns;
      if (best_period == 0 || p < best_period) best_period = p;
    }
    Timed([&] {
      for (std::size_t i = 0; i < candidates.size(); ++i) {
        const ActiveJob& a = candidates[i];
        const double weight = pl::priority_weight(a.priority);
        const double period = static_cast<double>(a.compute_ns + a.comm_ns);
        const double base = period / static_cast<double>(best_period) - 1.0;
        if (a.links.empty()) {
          cost[i] = weight * base;
          continue;
        }
        pl::Job job;
        job.id = kWhatIfId;
        job.priority = a.priority;
        job.profile = ProfileOf(a);
        const std::vector<std::vector<pl::NodeId>> nodes = {
            std::vector<pl::NodeId>(a.nodes.begin(), a.nodes.end())};
        const pl::WhatIfResult r = pl::what_if(*online_, job, nodes).front();
        cost[i] = weight * ((1.0 + base) * (1.0 + r.job_slowdown) - 1.0) + r.neighbour_slowdown +
                  (r.hurts_higher_priority ? 1e6 : 0.0);
      }
    });
    ++stats_.placements_scored;
    return cost;
  }

 private:
  struct Entry {
    bool active = false;
    pl::Job job;
    std::int64_t comm_ns = 0;
    std::int64_t compute_ns = 0;  // the compute phase its profile assumes
    bool has_tt = false;
    bool best_effort = false;
    Timetable tt;
    std::uint64_t consumed_version = 0;
    bool align = false;  // the next phase enters a moved slot (GateTimetable)
    Timetable align_tt;
    std::deque<std::int64_t> recent_compute;
    std::deque<std::int64_t> recent_comm;
    std::int64_t base_comm_ns = 0;    // its wire time, the least window
    std::size_t phases_under_tt = 0;  // phases since its timetable last changed
    std::size_t since_plan = 0;
    int fail_opens = 0;
    std::int64_t refused_window_ns = 0;  // a widening not taken (it stretched the period)
  };

  // Whether the widening just planned stretched the job's period (pl::widening_stretches).
  bool WideningStretches(const pl::Plan& before, pl::JobId id) const {
    const pl::JobPlan* was = before.find(id);
    if (was == nullptr) return false;
    const pl::Plan after = online_->snapshot();
    const pl::JobPlan* now = after.find(id);
    return now != nullptr && pl::widening_stretches(*was, *now);
  }

  template <class F>
  void Timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    stats_.planner_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // The controller's offline recalculation (docs/planner.md), run after the online planner changed
  // the plan: a bounded, seeded search (an iteration cap rather than a time budget, so that a
  // run is reproducible) whose plan is adopted only when it beats the current one.
  void Offline(std::int64_t now_ns) {
    if (!policy_.controller || policy_.offline_iterations <= 0) return;
    if (now_ns - last_offline_ns_ < kOfflineSpacingNs && last_offline_ns_ >= 0) {
      offline_pending_ = true;  // run it as soon as the spacing allows
      return;
    }
    offline_pending_ = false;
    last_offline_ns_ = now_ns;
    pl::Problem problem;
    problem.topology = topology_;
    problem.jobs = online_->jobs();
    if (problem.jobs.size() < 2) return;
    const pl::Plan current = online_->snapshot();
    pl::OfflineOptions o;
    o.planner = options_;
    o.seed = static_cast<std::uint64_t>(now_ns) ^ 0x6d657472ull;
    o.max_iterations = static_cast<std::uint64_t>(
        std::max<long>(2, policy_.offline_iterations * 50 /
                              static_cast<long>(std::max<std::size_t>(50, problem.jobs.size()))));
    std::optional<pl::Plan> better;
    Timed([&] { better = pl::recalculate(problem, current, o); });
    ++stats_.offline_runs;
    if (better) {
      ++stats_.offline_adopted;
      online_->adopt(problem.jobs, *better);
    }
  }

  void ReplanCassini() {
    pl::Problem problem;
    problem.topology = topology_;
    for (std::size_t i : active_) problem.jobs.push_back(entries_[i].job);
    pl::Plan plan;
    Timed([&] { plan = pl::plan_cassini(problem); });
    ++stats_.plans;
    Refresh(plan);
  }

  void Refresh(const pl::Plan& plan) {
    for (const pl::JobPlan& jp : plan.jobs) {
      Entry& e = entries_.at(jp.id);
      if (!e.active) continue;
      // What the scheduler service pushes: the planner's timetable (a best-effort job keeps a
      // window every period, with no late slack; window = period means ungated; a phase later
      // than its slack goes at once rather than waiting more than period − window).
      Timetable tt = pl::to_timetable(jp, plan.epoch_ns);
      tt.version = e.tt.version;
      const uint32_t check = ValidateTimetable(tt);
      e.best_effort = jp.best_effort;
      if ((check & kTimetableRejectMask) != 0) {
        e.has_tt = false;  // the shim would keep running ungated
        continue;
      }
      // A new version only when the job's slot changed (the gate of a CASSINI job acts once per
      // version).
      if (!e.has_tt || tt != e.tt) {
        ++tt.version;
        e.phases_under_tt = 0;
        e.refused_window_ns = 0;  // a new slot: a widening may fit now
      }
      // Its slot moved (or it was ungated): its next phase aligns to the new slot.
      if (!e.has_tt || e.tt.window_ns >= e.tt.period_ns || tt.period_ns != e.tt.period_ns ||
          tt.offset_ns != e.tt.offset_ns) {
        e.align = true;
      }
      e.tt = tt;
      e.has_tt = true;
    }
  }

  PolicyConfig policy_;
  pl::Topology topology_;
  pl::PlannerOptions options_;
  std::optional<pl::OnlinePlanner> online_;
  std::vector<Entry> entries_;
  std::vector<std::size_t> active_;
  SchedulerStats stats_;
  std::int64_t last_offline_ns_ = -1;
  bool offline_pending_ = false;
  static constexpr pl::JobId kWhatIfId = ~pl::JobId{0};
  static constexpr std::int64_t kOfflineSpacingNs = 1'000'000'000;  // at most once a second
};

}  // namespace

std::unique_ptr<TimeScheduler> MakeTimeScheduler(const PolicyConfig& policy, const Cluster& cluster,
                                                 std::size_t job_count) {
  if (policy.scheduling == SchedulingKind::kNone) return nullptr;
  return std::make_unique<PlannerScheduler>(policy, cluster, job_count);
}

}  // namespace metronome::sim
