// The planning worker: the planners (through the controller's PlanningAdapter) and the threads
// that run them.
//
// The cluster is planned in parts (controller.planning_parts), each with its own planner and
// lock, so that a long round in one part (a burst of joins, a repack of a crowded link) does not
// hold up the pushes of another. Jobs that share a link are always planned in one part
// (part_map.hpp): a job that would join two parts takes the jobs connected to it from the one
// into the other first. Jobs that only share a part wait for each other's rounds, a share
// (10 ms of planning) at a time.
//
// The parts' rounds run on a pool of threads (controller.planning_threads). Told by the
// registry that changes were queued, one thread takes them, sorts them by part, and runs the
// round of the first idle part with work itself (a join costs one thread wake-up, as with one
// planner), leaving the rest to the others. A round plans holding only its part's planner lock
// (and, to take jobs from other parts, theirs, in index order), then hands the plan to the
// registry. The offline thread runs the background recalculation of one part an interval, in
// turn, on a copy of it, without any lock. No thread holds a planner's lock while it calls into the
// registry.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "metronome/controller/planning.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/metrics.hpp"
#include "part_map.hpp"

namespace metronome::service {

class Registry;
struct PlanningWork;

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

  size_t Parts() const { return parts_.size(); }
  // Where the previous leader ran its jobs (Service::InheritPlan): every part is told.
  void Inherit(const std::map<std::string, Timetable>& timetables, int64_t for_ms);
  // The plan before any job (the registry's first view of the links).
  controller::PlanSummary InitialPlan() const;
  // Immutable topology queries: safe from any thread.
  size_t LinkCount() const;
  std::vector<std::string> JobLinks(const controller::PlanJob& job) const;
  // "If this job joined on these nodes", against the parts its links belong to (under their
  // locks; across several parts, on a copy of them).
  std::vector<controller::WhatIfEntry> WhatIf(const controller::PlanJob& candidate,
                                              const std::map<uint64_t, std::string>& names);
  // Tests: called in every round, on the part's thread, under its planner's lock, before it
  // plans (to hold one part's round while another's goes on).
  void OnRound(std::function<void(size_t part)> hook) { round_hook_ = std::move(hook); }

 private:
  struct Part;
  struct Backlog;
  struct Merge;

  void ThreadLoop(Registry& registry);
  void OfflineLoop(std::stop_token stop);
  // Under coord_mu_: sorts changes into the parts' backlogs; queues the rounds that can start.
  void Route(PlanningWork& work);
  void Dispatch();
  void Queue(Part& part);
  size_t PartForNewJob() const;
  // A round (no lock held on entry): the planning under the planner locks, then the registry.
  // What it leaves: the jobs it found planned nowhere (left, or refused), and the changes it
  // left for the next round (it yielded).
  struct Leftovers;
  Leftovers RunRound(Part& part, Registry& registry);
  bool AdoptOffline(Part& part, const controller::OfflineResult& result);  // under part.mu

  const ServiceConfig& config_;
  Metrics& metrics_;
  std::function<void()> pushes_ready_;
  std::function<void(size_t)> round_hook_;
  std::vector<std::unique_ptr<Part>> parts_;
  const std::vector<std::string> link_names_;

  // The coordination lock: the part map, the backlogs, which parts are busy, the rounds ready.
  // Held briefly; taken before the registry's (TakeWork), never while a planner's is held.
  std::mutex coord_mu_;
  std::condition_variable cv_;  // changes queued, a round ready, or stopping
  bool stopping_ = false;
  bool changes_queued_ = false;
  PartMap part_map_;
  std::vector<Merge> merges_;  // in arrival order
  std::deque<Part*> ready_;    // parts whose rounds wait for a thread
  size_t running_ = 0;         // rounds under way

  std::vector<std::thread> threads_;
  std::jthread offline_thread_;
  std::condition_variable_any offline_cv_;
};

}  // namespace metronome::service
