#include "planning_worker.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "metronome/common/clock.hpp"
#include "registry.hpp"

namespace metronome::service {

using controller::OfflineResult;
using controller::OfflineTask;

PlanningWorker::PlanningWorker(const ServiceConfig& config, Metrics& metrics)
    : config_(config),
      metrics_(metrics),
      planner_(config.topology, config.planning),
      link_names_(planner_.LinkNames()) {}

PlanningWorker::~PlanningWorker() {
  Stop();
}

void PlanningWorker::Start(Registry& registry, std::function<void()> pushes_ready) {
  pushes_ready_ = std::move(pushes_ready);
  planning_thread_ = std::thread([this, &registry] {
    pthread_setname_np(pthread_self(), "mtr-planner");  // names show in top -H, perf, gdb
    PlanningLoop(registry);
  });
  if (config_.controller.offline_interval_ms > 0) {
    offline_thread_ = std::jthread([this, &registry](std::stop_token st) {
      pthread_setname_np(pthread_self(), "mtr-offline");
      OfflineLoop(registry, st);
    });
  }
}

void PlanningWorker::Stop() {
  if (offline_thread_.joinable()) {
    offline_thread_.request_stop();
    offline_cv_.notify_all();
    offline_thread_.join();
  }
  if (planning_thread_.joinable()) planning_thread_.join();
}

void PlanningWorker::Inherit(std::map<std::string, Timetable> timetables, int64_t for_ms) {
  std::lock_guard lock(mu_);
  planner_.Inherit(std::move(timetables),
                   std::chrono::steady_clock::now() + std::chrono::milliseconds(for_ms));
}

controller::PlanSummary PlanningWorker::InitialPlan() const {
  std::lock_guard lock(mu_);
  return planner_.Summary();
}

std::vector<std::string> PlanningWorker::JobLinks(const controller::PlanJob& job) const {
  std::vector<std::string> names;
  for (uint32_t l : planner_.JobLinks(job)) names.push_back(link_names_[l]);
  return names;
}

std::vector<controller::WhatIfEntry> PlanningWorker::WhatIf(
    const controller::PlanJob& candidate, const std::map<uint64_t, std::string>& names) {
  std::lock_guard lock(mu_);
  return planner_.WhatIf(candidate, names);
}

// One round takes every change queued since the last, plans them with the registry unlocked,
// then hands the plan to the registry (which queues the pushes) and has the endpoint send.
void PlanningWorker::PlanningLoop(Registry& registry) {
  PlanningWork work;
  while (registry.WaitForWork(work)) {
    PlanningOutcome out;
    out.trigger_ns = RealtimeNs();
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mu_);
      // Leaves first, then every join and re-plan of the round in one planner call.
      for (const auto& p : work.changes) {
        out.trigger_ns = std::min(out.trigger_ns, p.trigger_ns);
        if (p.kind != PlanChange::kLeave) continue;
        try {
          planner_.RemoveJob(p.id);
        } catch (const std::exception& e) {
          metrics_.PlanningErrors().Increment();
          spdlog::error("planner: cannot remove job {}: {}", p.id, e.what());
        }
        ++out.leaves[p.reason];
      }
      if (!work.adds.empty()) {
        // Windows that the overrun rule widens are tried one by one, after the rest: one that
        // would stretch its job's period is not taken (PlanningAdapter::WidenWindow).
        std::vector<controller::PlanJob> batch;
        std::vector<controller::PlanJob> widen;
        for (const auto& a : work.adds) (a.reason == "overrun" ? widen : batch).push_back(a.job);
        const controller::PlanningAdapter::RoundOutcome round = planner_.PlanRound(batch, widen);
        out.widen_refused = round.widen_refused;
        for (const auto& [id, why] : round.refused) {
          out.refused.insert(id);
          metrics_.PlanningErrors().Increment();
          spdlog::error("planner: cannot plan job {}: {}", id, why);
        }
      }
      if (!work.changes.empty()) {
        out.plan = planner_.Summary();  // part of the round: every push waits for it
        metrics_.PlanDuration().Observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      if (work.offline && AdoptOffline(*work.offline)) {
        out.plan = planner_.Summary();
        if (work.changes.empty()) out.reason = "offline";
      }
    }
    if (!out.plan) continue;
    changes_.KeepChanged(out.plan->jobs);
    planned_jobs_ = changes_.Jobs();
    registry.ApplyRound(work, out);
    if (pushes_ready_) pushes_ready_();
  }
}

// Adopts a better plan from the background search unless the jobs changed since it started or
// it would move too many of them.
bool PlanningWorker::AdoptOffline(const OfflineResult& r) {
  switch (planner_.AdoptOffline(r, config_.controller.offline_max_moves)) {
    case controller::PlanningAdapter::Adoption::kNoGain:
      metrics_.OfflineRuns("no_gain").Increment();
      spdlog::debug("offline: no better plan ({})", r.summary);
      return false;
    case controller::PlanningAdapter::Adoption::kStale:
      metrics_.OfflineRuns("stale").Increment();
      spdlog::info("offline: better plan discarded, the jobs changed meanwhile ({})", r.summary);
      return false;
    case controller::PlanningAdapter::Adoption::kTooDisruptive:
      metrics_.OfflineRuns("too_disruptive").Increment();
      spdlog::info("offline: better plan skipped: it moves {} jobs (max {}) ({})", r.moved.size(),
                   config_.controller.offline_max_moves, r.summary);
      return false;
    case controller::PlanningAdapter::Adoption::kRefused:
      return false;
    case controller::PlanningAdapter::Adoption::kApplied:
      break;
  }
  metrics_.OfflineRuns("applied").Increment();
  metrics_.Replans("offline").Increment();
  metrics_.ControllerDecisions("offline_apply").Increment();
  spdlog::info("controller: decision=offline_apply moves {} job(s) ({})", r.moved.size(),
               r.summary);
  return true;
}

// Every offline_interval_ms: a copy of the problem under the planner's lock, the search without
// any lock (it may take its whole budget), the result to the registry for the next round.
void PlanningWorker::OfflineLoop(Registry& registry, std::stop_token stop) {
  std::mutex m;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lk(m);
      offline_cv_.wait_for(lk, stop,
                           std::chrono::milliseconds(config_.controller.offline_interval_ms),
                           [] { return false; });
    }
    if (stop.stop_requested()) break;
    if (planned_jobs_ < 2 || !registry.WantsOffline()) continue;
    std::shared_ptr<OfflineTask> task;
    {
      std::lock_guard lock(mu_);
      task = planner_.PrepareOffline();
    }
    OfflineResult r =
        controller::PlanningAdapter::RunOffline(*task, config_.controller.offline_budget_ms, stop);
    registry.PostOffline(std::move(r));
  }
}

}  // namespace metronome::service
