#include "planning_worker.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "metronome/common/clock.hpp"
#include "registry.hpp"
#include "schedule_changes.hpp"

namespace metronome::service {

using controller::OfflineResult;
using controller::OfflineTask;

// A round that has planned this long pushes what it planned and leaves the rest of its batch to
// its part's next round, behind the changes that came meanwhile: a burst of joins (300 on one
// link: ~150 ms at 8,192 nodes) holds up a join beside it for one share, not the whole burst.
constexpr auto kRoundShare = std::chrono::milliseconds(10);

// What a part has to plan: its changes since its last round, one add per job (the latest), and
// a finished background search.
struct PlanningWorker::Backlog {
  std::vector<PlanChange> changes;
  std::vector<PlanningWork::Add> adds;
  std::optional<OfflineResult> offline;

  bool Empty() const { return changes.empty() && adds.empty() && !offline; }
  bool HasAdd(uint64_t id) const {
    return std::any_of(adds.begin(), adds.end(), [&](const auto& a) { return a.job.id == id; });
  }
  void Add(PlanningWork::Add add) {
    for (auto& a : adds) {
      if (a.job.id != add.job.id) continue;
      a.job = std::move(add.job);  // the newest profile; the first reason stands
      a.replan = a.replan || add.replan;
      return;
    }
    adds.push_back(std::move(add));
  }
  void Leave(const PlanChange& leave) {
    std::erase_if(adds, [&](const auto& a) { return a.job.id == leave.id; });
    changes.push_back(leave);
  }
  // Moves what concerns `ids` into `to`.
  void MoveTo(Backlog& to, const std::set<uint64_t>& ids) {
    for (auto& a : adds) {
      if (ids.contains(a.job.id)) to.Add(std::move(a));
    }
    std::erase_if(adds, [&](const auto& a) { return ids.contains(a.job.id); });
    for (const auto& c : changes) {
      if (ids.contains(c.id)) to.changes.push_back(c);
    }
    std::erase_if(changes, [&](const auto& c) { return ids.contains(c.id); });
  }
};

// A job whose links belong to several parts: it waits until they are all idle, then the jobs
// connected to it move into one of them and it is planned there.
struct PlanningWorker::Merge {
  PlanningWork::Add add;
  std::vector<PlanChange> changes;
  std::vector<uint32_t> links;
};

struct PlanningWorker::Leftovers {
  std::vector<uint64_t> gone;
  Backlog deferred;
};

struct PlanningWorker::Part {
  Part(size_t i, const ServiceConfig& config)
      : index(i), planner(config.topology, config.planning) {}
  const size_t index;
  mutable std::mutex mu;  // the planner's lock
  controller::PlanningAdapter planner;
  ScheduleChanges changes;  // used by the round that holds the part (busy)
  std::atomic<size_t> planned_jobs{0};
  // Under coord_mu_:
  bool busy = false;    // a round of its own, or one that takes jobs from it, is under way
  bool queued = false;  // in ready_: its round starts with what its backlog holds then
  bool held = false;    // a merge waits for it: no round of its own starts
  Backlog backlog;
  // The round handed out (written under coord_mu_, then read by the thread that runs it):
  PlanningWork work;
  std::vector<std::pair<size_t, std::vector<uint64_t>>> absorb;  // jobs it takes first, by part
};

PlanningWorker::PlanningWorker(const ServiceConfig& config, Metrics& metrics)
    : config_(config),
      metrics_(metrics),
      parts_([&] {
        std::vector<std::unique_ptr<Part>> parts;
        const size_t n = std::max<size_t>(config.controller.planning_parts, 1);
        for (size_t i = 0; i < n; ++i) parts.push_back(std::make_unique<Part>(i, config));
        return parts;
      }()),
      link_names_(parts_.front()->planner.LinkNames()),
      part_map_(parts_.size()) {}

PlanningWorker::~PlanningWorker() {
  Stop();
}

void PlanningWorker::Start(Registry& registry, std::function<void()> pushes_ready) {
  pushes_ready_ = std::move(pushes_ready);
  registry.OnWork([this] {
    {
      std::lock_guard lock(coord_mu_);
      changes_queued_ = true;
    }
    cv_.notify_one();
  });
  const size_t threads = std::max<size_t>(config_.controller.planning_threads, 1);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i, &registry] {
      // names show in top -H, perf, gdb
      pthread_setname_np(pthread_self(), ("mtr-planner" + std::to_string(i)).c_str());
      ThreadLoop(registry);
    });
  }
  if (config_.controller.offline_interval_ms > 0) {
    offline_thread_ = std::jthread([this](std::stop_token st) {
      pthread_setname_np(pthread_self(), "mtr-offline");
      OfflineLoop(st);
    });
  }
}

void PlanningWorker::Stop() {
  if (offline_thread_.joinable()) {
    offline_thread_.request_stop();
    offline_cv_.notify_all();
    offline_thread_.join();
  }
  {
    std::lock_guard lock(coord_mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void PlanningWorker::Inherit(const std::map<std::string, Timetable>& timetables, int64_t for_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(for_ms);
  for (auto& p : parts_) {
    std::lock_guard lock(p->mu);
    p->planner.Inherit(timetables, until);
  }
}

controller::PlanSummary PlanningWorker::InitialPlan() const {
  std::lock_guard lock(parts_.front()->mu);
  return parts_.front()->planner.Summary();
}

size_t PlanningWorker::LinkCount() const {
  return link_names_.size();
}

std::vector<std::string> PlanningWorker::JobLinks(const controller::PlanJob& job) const {
  std::vector<std::string> names;
  for (uint32_t l : parts_.front()->planner.JobLinks(job)) names.push_back(link_names_[l]);
  return names;
}

std::vector<controller::WhatIfEntry> PlanningWorker::WhatIf(
    const controller::PlanJob& candidate, const std::map<uint64_t, std::string>& names) {
  const std::vector<uint32_t> links = parts_.front()->planner.JobLinks(candidate);
  std::set<size_t> parts;
  {
    std::lock_guard lock(coord_mu_);
    parts = part_map_.PartsOf(candidate.id, links);
  }
  if (parts.size() <= 1) {
    Part& part = *parts_[parts.empty() ? 0 : *parts.begin()];
    std::lock_guard lock(part.mu);
    return part.planner.WhatIf(candidate, names);
  }
  // The candidate would join several parts: asked of a planner that holds all of them.
  controller::PlanningAdapter joined(config_.topology, config_.planning);
  for (const size_t i : parts) {  // in index order, as every holder of several locks
    std::lock_guard lock(parts_[i]->mu);
    joined.Import(*parts_[i]->planner.Copy());
  }
  return joined.WhatIf(candidate, names);
}

// ---------------------------------------------------------------------------------------------
// The planning threads.

void PlanningWorker::ThreadLoop(Registry& registry) {
  std::unique_lock lock(coord_mu_);
  while (!stopping_) {
    if (changes_queued_) {
      changes_queued_ = false;
      PlanningWork work;
      registry.TakeWork(work);  // the registry's lock inside ours: never the other way round
      Route(work);
      Dispatch();
    }
    if (ready_.empty()) {
      cv_.wait(lock);
      continue;
    }
    Part& part = *ready_.front();
    ready_.pop_front();
    if (!ready_.empty()) cv_.notify_one();  // another thread takes the next
    part.queued = false;
    part.busy = true;
    ++running_;
    part.work = PlanningWork{};
    part.work.changes = std::move(part.backlog.changes);
    part.work.adds = std::move(part.backlog.adds);
    part.work.offline = std::move(part.backlog.offline);
    part.backlog = Backlog{};
    lock.unlock();
    Leftovers left = RunRound(part, registry);
    lock.lock();
    // What the round left waits behind what waited for it (a newer add of the same job, or its
    // leave, stands).
    for (auto& a : left.deferred.adds) {
      const uint64_t id = a.job.id;
      const bool left_meanwhile = std::any_of(
          part.backlog.changes.begin(), part.backlog.changes.end(),
          [&](const PlanChange& c) { return c.id == id && c.kind == PlanChange::kLeave; });
      if (!left_meanwhile && !part.backlog.HasAdd(id)) part.backlog.adds.push_back(std::move(a));
    }
    for (const auto& c : left.deferred.changes) part.backlog.changes.push_back(c);
    for (const uint64_t id : left.gone) {
      const bool again = part.backlog.HasAdd(id) ||
                         std::any_of(merges_.begin(), merges_.end(),
                                     [&](const Merge& m) { return m.add.job.id == id; });
      if (!again) part_map_.Release(id);
    }
    part.busy = false;
    --running_;
    for (const auto& [from, ids] : part.absorb) parts_[from]->busy = false;
    part.absorb.clear();
    Dispatch();  // what waited for this part
  }
}

// A job that shares no link with any planned job: a part whose round a free thread starts at
// once (idle, nothing queued), else the part whose round starts next (the job is planned in
// it), else the idle part with the fewest jobs, else the part with the fewest jobs.
size_t PlanningWorker::PartForNewJob() const {
  const auto fewest = [&](auto&& eligible) {
    std::optional<size_t> best;
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (eligible(*parts_[i]) && (!best || part_map_.Jobs(i) < part_map_.Jobs(*best))) best = i;
    }
    return best;
  };
  const auto idle = [](const Part& p) { return !p.busy && !p.held; };
  if (threads_.size() > running_ + ready_.size()) {
    if (const auto p = fewest([&](const Part& q) { return idle(q) && !q.queued; })) return *p;
  }
  if (!ready_.empty()) return ready_.front()->index;
  if (const auto p = fewest(idle)) return *p;
  return *fewest([](const Part&) { return true; });
}

void PlanningWorker::Route(PlanningWork& work) {
  std::map<uint64_t, size_t> routed;  // the part each job's add went to (parts_.size(): a merge)
  for (auto& a : work.adds) {
    const uint64_t id = a.job.id;
    const auto waiting = std::find_if(merges_.begin(), merges_.end(),
                                      [&](const Merge& m) { return m.add.job.id == id; });
    if (waiting != merges_.end()) {
      waiting->add.job = std::move(a.job);
      waiting->links = parts_.front()->planner.JobLinks(waiting->add.job);
      routed[id] = parts_.size();
      continue;
    }
    std::vector<uint32_t> links = parts_.front()->planner.JobLinks(a.job);
    const std::set<size_t> parts = part_map_.PartsOf(id, links);
    if (parts.size() > 1) {
      merges_.push_back({std::move(a), {}, std::move(links)});
      routed[id] = parts_.size();
      continue;
    }
    const size_t p = parts.empty() ? PartForNewJob() : *parts.begin();
    part_map_.Claim(id, links, p);
    parts_[p]->backlog.Add(std::move(a));
    routed[id] = p;
  }
  for (const auto& c : work.changes) {
    if (c.kind == PlanChange::kLeave) {
      std::erase_if(merges_, [&](const Merge& m) { return m.add.job.id == c.id; });
      const auto p = part_map_.PartOf(c.id);
      parts_[p ? *p : PartForNewJob()]->backlog.Leave(c);
      continue;
    }
    const auto r = routed.find(c.id);
    if (r == routed.end()) continue;  // no profile yet: nothing to plan
    if (r->second < parts_.size()) {
      parts_[r->second]->backlog.changes.push_back(c);
    } else {
      for (auto& m : merges_) {
        if (m.add.job.id == c.id) m.changes.push_back(c);
      }
    }
  }
}

void PlanningWorker::Dispatch() {
  if (stopping_) return;
  for (auto& p : parts_) p->held = false;
  for (auto m = merges_.begin(); m != merges_.end();) {
    const uint64_t id = m->add.job.id;
    const std::set<size_t> parts = part_map_.PartsOf(id, m->links);
    const bool idle = std::none_of(parts.begin(), parts.end(), [&](size_t i) {
      return parts_[i]->busy || parts_[i]->held || parts_[i]->queued;
    });
    if (parts.size() > 1 && !idle) {
      for (const size_t i : parts) parts_[i]->held = true;  // no round of their own meanwhile
      ++m;
      continue;
    }
    // Into the part with the most jobs: the fewest move.
    size_t into = parts.empty() ? PartForNewJob() : *parts.begin();
    for (const size_t i : parts) {
      if (part_map_.Jobs(i) > part_map_.Jobs(into)) into = i;
    }
    Part& target = *parts_[into];
    std::vector<std::pair<size_t, std::vector<uint64_t>>> absorb;
    for (const size_t from : parts) {
      if (from == into) continue;
      std::vector<uint64_t> moved = part_map_.MoveConnected(from, id, m->links, into);
      parts_[from]->backlog.MoveTo(target.backlog, {moved.begin(), moved.end()});
      parts_[from]->busy = true;  // until the round that takes its jobs is over
      spdlog::info("planner: job {} joins parts {} and {}: {} job(s) move", m->add.job.name, from,
                   into, moved.size());
      absorb.emplace_back(from, std::move(moved));
    }
    part_map_.Claim(id, m->links, into);
    target.backlog.Add(std::move(m->add));
    for (const auto& c : m->changes) target.backlog.changes.push_back(c);
    m = merges_.erase(m);
    if (absorb.empty()) continue;  // the parts came apart meanwhile: planned as any other
    metrics_.Replans("part_merge").Increment();
    target.absorb = std::move(absorb);
    Queue(target);
  }
  for (auto& p : parts_) {
    if (!p->busy && !p->held && !p->backlog.Empty()) Queue(*p);
  }
}

// For the first planning thread free: the round takes what the backlog holds when it starts.
void PlanningWorker::Queue(Part& part) {
  if (part.queued) return;
  part.queued = true;
  ready_.push_back(&part);
}

// One round: the jobs it takes from other parts first, then the leaves, then every join and
// re-plan in one planner call; the plan to the registry (which queues the pushes), and the
// endpoint told to send.
PlanningWorker::Leftovers PlanningWorker::RunRound(Part& part, Registry& registry) {
  const PlanningWork& work = part.work;
  PlanningOutcome out;
  out.part = part.index;
  out.trigger_ns = RealtimeNs();
  Leftovers left;
  std::vector<uint64_t>& gone = left.gone;  // left, or refused and not planned: links are free
  {
    std::vector<Part*> held{&part};
    for (const auto& [from, ids] : part.absorb) held.push_back(parts_[from].get());
    std::sort(held.begin(), held.end(), [](Part* a, Part* b) { return a->index < b->index; });
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(held.size());
    for (Part* p : held) locks.emplace_back(p->mu);  // in index order: no cycle of waits

    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& [from, ids] : part.absorb) {
      try {
        part.planner.Import(*parts_[from]->planner.Extract(ids));
      } catch (const std::exception& e) {
        metrics_.PlanningErrors().Increment();
        spdlog::error("planner: cannot move {} job(s) from part {} to {}: {}", ids.size(), from,
                      part.index, e.what());
      }
    }
    if (round_hook_) round_hook_(part.index);
    for (const auto& p : work.changes) {
      out.trigger_ns = std::min(out.trigger_ns, p.trigger_ns);
      if (p.kind != PlanChange::kLeave) continue;
      try {
        part.planner.RemoveJob(p.id);
      } catch (const std::exception& e) {
        metrics_.PlanningErrors().Increment();
        spdlog::error("planner: cannot remove job {}: {}", p.id, e.what());
      }
      gone.push_back(p.id);
      ++out.leaves[p.reason];
    }
    if (!work.adds.empty()) {
      // Windows that the overrun rule widens are tried one by one, after the rest: one that
      // would stretch its job's period is not taken (PlanningAdapter::WidenWindow).
      std::vector<controller::PlanJob> batch;
      std::vector<controller::PlanJob> widen;
      for (const auto& a : work.adds) (a.reason == "overrun" ? widen : batch).push_back(a.job);
      const auto yield = [&] { return std::chrono::steady_clock::now() - t0 > kRoundShare; };
      const controller::PlanningAdapter::RoundOutcome round =
          part.planner.PlanRound(batch, widen, yield);
      out.widen_refused = round.widen_refused;
      out.deferred.insert(round.deferred.begin(), round.deferred.end());
      if (!round.deferred.empty()) {
        metrics_.RoundsYielded().Increment();
        spdlog::debug(
            "planner: part {} yields after {} ms, {} job(s) left for its next round", part.index,
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count(),
            round.deferred.size());
      }
      for (const auto& a : work.adds) {
        if (out.deferred.contains(a.job.id)) left.deferred.adds.push_back(a);
      }
      for (const auto& c : work.changes) {
        if (c.kind != PlanChange::kLeave && out.deferred.contains(c.id)) {
          left.deferred.changes.push_back(c);
        }
      }
      for (const auto& [id, why] : round.refused) {
        out.refused.insert(id);
        if (!part.planner.Contains(id)) gone.push_back(id);
        metrics_.PlanningErrors().Increment();
        spdlog::error("planner: cannot plan job {}: {}", id, why);
      }
    }
    if (!work.changes.empty() || !part.absorb.empty()) {
      out.plan = part.planner.Summary();  // part of the round: every push waits for it
      metrics_.PlanDuration().Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (work.offline && AdoptOffline(part, *work.offline)) {
      out.plan = part.planner.Summary();
      if (work.changes.empty()) out.reason = "offline";
    }
    for (const auto& [from, ids] : part.absorb) {
      out.vacated.emplace_back(from, parts_[from]->planner.Summary());
    }
  }
  if (out.plan) {
    part.changes.KeepChanged(out.plan->jobs);
    part.planned_jobs = part.changes.Jobs();
    for (auto& [from, summary] : out.vacated) {
      parts_[from]->changes.KeepChanged(summary.jobs);
      parts_[from]->planned_jobs = parts_[from]->changes.Jobs();
    }
    registry.ApplyRound(work, out);
    if (pushes_ready_) pushes_ready_();
  }
  return left;
}

// Adopts a better plan from the background search unless the jobs changed since it started or
// it would move too many of them.
bool PlanningWorker::AdoptOffline(Part& part, const OfflineResult& r) {
  switch (part.planner.AdoptOffline(r, config_.controller.offline_max_moves)) {
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

// Every offline_interval_ms, the next part in turn with two jobs or more (one search an
// interval, whatever the number of parts): a copy of its problem under its lock, the search
// without any lock (it may take its whole budget), the result to the part's next round.
void PlanningWorker::OfflineLoop(std::stop_token stop) {
  std::mutex m;
  size_t next = 0;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lk(m);
      offline_cv_.wait_for(lk, stop,
                           std::chrono::milliseconds(config_.controller.offline_interval_ms),
                           [] { return false; });
    }
    if (stop.stop_requested()) return;
    Part* part = nullptr;
    for (size_t k = 0; k < parts_.size() && part == nullptr; ++k) {
      Part& p = *parts_[(next + k) % parts_.size()];
      if (p.planned_jobs < 2) continue;
      std::lock_guard lock(coord_mu_);
      if (!p.backlog.offline) part = &p;  // else the last one is not taken yet
    }
    if (part == nullptr) continue;
    next = part->index + 1;
    std::shared_ptr<OfflineTask> task;
    {
      std::lock_guard lock(part->mu);
      task = part->planner.PrepareOffline();
    }
    OfflineResult r =
        controller::PlanningAdapter::RunOffline(*task, config_.controller.offline_budget_ms, stop);
    {
      std::lock_guard lock(coord_mu_);
      part->backlog.offline = std::move(r);
      Dispatch();
    }
    cv_.notify_one();
  }
}

}  // namespace metronome::service
