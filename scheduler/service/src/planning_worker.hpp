// The planning worker: the planner (through the controller's PlanningAdapter) and the two
// threads that run it. The planning thread takes the registry's queued changes, plans them
// holding only the planner's lock, and hands the plan back to the registry; the offline thread
// runs the background recalculation on a copy of the problem, without any lock, and posts its
// result to the registry for the next round. The planner's lock is private to this class and
// released before every call into the registry: no thread holds both locks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "metronome/controller/planning.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/metrics.hpp"
#include "schedule_changes.hpp"

namespace metronome::service {

class Registry;

class PlanningWorker {
 public:
  PlanningWorker(const ServiceConfig& config, Metrics& metrics);
  ~PlanningWorker();
  PlanningWorker(const PlanningWorker&) = delete;
  PlanningWorker& operator=(const PlanningWorker&) = delete;

  // Starts the threads; `pushes_ready` is called (without any lock) after each plan the
  // registry applied, so that the endpoint sends the timetables.
  void Start(Registry& registry, std::function<void()> pushes_ready);
  // Joins the threads (the registry must have been stopped first).
  void Stop();

  // Where the previous leader ran its jobs (Service::InheritPlan), under the planner's lock.
  void Inherit(std::map<std::string, Timetable> timetables, int64_t for_ms);
  // The plan before any job (the registry's first view of the links).
  controller::PlanSummary InitialPlan() const;
  // Immutable topology queries: safe from any thread.
  size_t LinkCount() const { return planner_.LinkCount(); }
  std::vector<std::string> JobLinks(const controller::PlanJob& job) const;
  // "If this job joined on these nodes" (under the planner's lock).
  std::vector<controller::WhatIfEntry> WhatIf(const controller::PlanJob& candidate,
                                              const std::map<uint64_t, std::string>& names);

 private:
  void PlanningLoop(Registry& registry);
  void OfflineLoop(Registry& registry, std::stop_token stop);
  bool AdoptOffline(const controller::OfflineResult& result);  // under mu_

  const ServiceConfig& config_;
  Metrics& metrics_;
  std::function<void()> pushes_ready_;
  mutable std::mutex mu_;  // the planner's lock
  controller::PlanningAdapter planner_;
  const std::vector<std::string> link_names_;
  ScheduleChanges changes_;              // the planning thread's
  std::atomic<size_t> planned_jobs_{0};  // for the offline thread: worth a search from two
  std::thread planning_thread_;
  std::jthread offline_thread_;
  std::condition_variable_any offline_cv_;
};

}  // namespace metronome::service
