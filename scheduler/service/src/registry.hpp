// The registry: clients, jobs and their ranks, the current plan's timetables, and the queue of
// changes for the planning worker. Everything here is guarded by the registry's one lock, which
// no method holds while it calls out: the planning worker calls in only while it holds no
// planner's lock, so no thread ever holds both.
//
// The endpoint thread hands it each message (Handle) and the periodic Tick, and sends what it
// queued (TakeOutbox); the planning worker, told there is work, takes the queued changes
// (TakeWork) and gives back
// the plan (ApplyRound); the HTTP threads and the plan listener read snapshots.
#pragma once

#include <spdlog/common.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "metronome/common/protocol.hpp"
#include "metronome/controller/planning.hpp"
#include "metronome/controller/turns.hpp"
#include "metronome/service/config.hpp"
#include "metronome/service/metrics.hpp"
#include "metronome/service/service.hpp"
#include "metronome/service/state.hpp"
#include "pod_identity.hpp"

namespace metronome::service {

// A message ready to send: the peer's routing id, the encoded message, its type for metrics.
struct Outgoing {
  std::string identity;
  std::string payload;
  const char* type;
};

// A change for the planning worker.
struct PlanChange {
  enum Kind { kJoin, kLeave, kReplan } kind;
  uint64_t id;
  std::string reason;
  int64_t trigger_ns;
};

// One planning round's input, as the registry had it when the round started.
struct PlanningWork {
  std::vector<PlanChange> changes;
  struct Add {
    PlanJob job;         // the job as the registry has it now
    std::string reason;  // the first change that asked for it
    bool replan = false;
  };
  std::vector<Add> adds;  // one per job to (re-)place
  std::optional<controller::OfflineResult> offline;
};

// What the round did: the plan of the part that planned it, if it changed, and what it did not
// take.
struct PlanningOutcome {
  size_t part = 0;  // the planning part (PlanningWorker)
  // Its `jobs` list only the schedules that changed since the last plan handed over (the rest
  // stand as their jobs hold them): ScheduleChanges.
  std::optional<PlanSummary> plan;
  // The parts the round took jobs from, and their plans without them.
  std::vector<std::pair<size_t, PlanSummary>> vacated;
  const char* reason = "plan";  // "offline" when only the background search changed it
  int64_t trigger_ns = 0;
  std::set<uint64_t> refused;         // the planner refused the job
  std::set<uint64_t> widen_refused;   // a widening that would have stretched the period
  std::set<uint64_t> deferred;        // left for the part's next round (it yielded)
  std::map<std::string, int> leaves;  // departures planned, by reason
};

class Registry {
 public:
  // `job_links` names the links a job crosses (immutable topology queries: no lock needed).
  Registry(const ServiceConfig& config, Metrics& metrics,
           std::function<std::vector<std::string>(const PlanJob&)> job_links,
           PlanSummary initial_plan);

  // The endpoint thread.
  void Handle(const std::vector<std::string>& frames, int64_t t_recv);
  void Tick(int64_t now);
  std::vector<Outgoing> TakeOutbox();

  // Called (without the registry's lock, on the endpoint thread) whenever changes were queued.
  void OnWork(std::function<void()> listener) { on_work_ = std::move(listener); }
  // The planning worker: takes the changes queued since the last call.
  void TakeWork(PlanningWork& work);
  // A planning part's thread: takes the outcome's plans (moved: at thousands of jobs a copy
  // under the lock costs milliseconds; what they replace is freed after the lock) and queues
  // the timetables.
  void ApplyRound(const PlanningWork& work, PlanningOutcome& outcome);

  // The plan listener's thread: blocks until the plan version moved past `seen`, and not before
  // `not_before` (false once stopping).
  bool WaitForPlanChange(uint64_t seen, std::chrono::steady_clock::time_point not_before);
  uint64_t PlanVersion();

  void Stop();

  // The Kubernetes integration's pod check (pod_identity.hpp): once enabled, every hello is
  // checked against the pods set last (until the first set, all are refused).
  void EnablePodCheck();
  void SetPods(PodDirectory pods);

  // The jobs a previous leader ran gated (Service::InheritPlan). Until `until_ns` (RealtimeNs)
  // such a job is planned only once its ranks' nodes give it links: its ranks come back one
  // hello at a time, and a plan made before the second node is known crosses no link, so it
  // would be an open timetable in place of the job's slot (its shims keep the old one meanwhile).
  void WaitForLinks(std::set<std::string> jobs, int64_t until_ns);

  // Snapshots (thread-safe).
  ClusterView View(const TopologyConfig& topology, const PlanningConfig& planning);
  nlohmann::json StatusJson(int64_t started_ns, const std::string& endpoint, bool curve);
  // At most `limit` jobs, in name order, after the job named `after` ("": from the first).
  nlohmann::json JobsJson(size_t limit, const std::string& after);
  std::optional<nlohmann::json> JobJson(const std::string& name);
  std::optional<nlohmann::json> TimetableJson(const std::string& name);
  std::optional<nlohmann::json> PhasesJson(const std::string& name, size_t limit);
  // At most `limit` links, in the plan's order, after the link named `after` ("": from the
  // first); nullopt when the plan has no link named `after`.
  std::optional<nlohmann::json> LinksJson(size_t limit, const std::string& after);
  // nullopt, with the name, for a link the plan does not have.
  std::optional<nlohmann::json> TimelineJson(const TimelineQuery& q, std::string& unknown_link);
  // For a what-if: every job's name by id, and an id no registered job has.
  std::map<uint64_t, std::string> JobNames(uint64_t& free_id);
  // The state's metric families (registry_metrics.cpp): the service's /metrics collector.
  std::vector<prometheus::MetricFamily> MetricFamilies() const;

 private:
  void HandleLocked(const std::vector<std::string>& frames, int64_t t_recv);
  void TickLocked(int64_t now);
  void HandleHello(ClientState& client, const proto::Hello& m, int64_t now);
  // The job a message of `client` names, when that client registered the rank it names; else
  // the message (`what`) is answered and counted as unexpected, and nullptr.
  JobState* Sender(ClientState& client, const std::string& job_id, uint32_t rank, const char* what);
  void HandleReport(ClientState& client, const proto::ProfileReport& m, int64_t now);
  void HandleBye(ClientState& client, const proto::Bye& m, int64_t now);
  // Taking turns (controller/turns.hpp): a job's phase edge relayed to the jobs that take turns
  // with it; the sets recomputed from the jobs' links and profiles, and pushed where they moved.
  void HandleEdge(ClientState& client, const proto::PhaseEdge& m, int64_t now);
  void RefreshTurns(int64_t now);
  void PushTurns(JobState& job);
  void Reject(ClientState* client, const std::string& identity, proto::ErrorCode code,
              const std::string& reason, const std::string& message);
  void Queue(const std::string& identity, const proto::Message& m);
  void PushTimetable(JobState& job, RankState& rank, const char* reason, int64_t now);
  void RemoveJob(const std::string& name, const char* reason);
  // After ranks left a job that still has some: its priority is again the highest of theirs
  // (re-planned when that moves).
  void RanksLeft(JobState& job, int64_t now);
  // A job's first profile: its join queued, or held back (WaitForLinks) while it has no links.
  void QueueJoin(JobState& job, int64_t now);
  void ReleaseJoin(JobState& job, int64_t now, const std::string& why);
  // The jobs not planned yet: each yields to the gated windows of higher priority on its links
  // (controller/observer_yields.hpp); their ranks are pushed what changed.
  void RefreshObservers(int64_t now);
  // Takes part `part`'s plan in: its links and snapshot, and its changed schedules pushed;
  // leaves what it replaces in `plan`.
  void ApplyPlan(size_t part, PlanSummary& plan, int64_t trigger_ns, const char* reason);
  void MergePart(size_t part, PlanSummary& plan);
  void Decide(JobState& job, const char* decision, const std::string& detail);
  void Decide(JobState& job, const char* decision, spdlog::level::level_enum level,
              const std::string& detail);
  std::vector<std::string> LinksOf(const JobState& job) const;
  // The identities of the job's ranks whose shims take turns, each once (with node sharing
  // one client speaks for several ranks).
  std::set<std::string> TurnIdentities(const JobState& job) const;

  // Readers of every job (the status API, the gauges, the plan listener) hold the lock for a
  // slice of this many jobs at a time: at thousands of jobs one pass held every report, ping
  // and planning round behind it for milliseconds.
  static constexpr size_t kJobsPerSlice = 256;
  // f(name, job) for every job, in name order, under the lock a slice at a time: a job that
  // comes or goes meanwhile may be seen or not; each one seen is seen whole.
  template <class F>
  void ForEachJobSliced(F&& f) const {
    std::string last;
    for (bool first = true, more = true; more; first = false) {
      std::lock_guard lock(mu_);
      auto it = first ? jobs_.begin() : jobs_.upper_bound(last);
      for (size_t n = 0; it != jobs_.end() && n < kJobsPerSlice; ++it, ++n) {
        f(it->first, it->second);
      }
      more = it != jobs_.end();
      if (more) last = std::prev(it)->first;
    }
  }
  // What the status and the gauges count, jobs a slice at a time.
  struct Tally {
    size_t jobs = 0, ranks = 0, planned = 0, best_effort = 0, clients = 0, links = 0;
  };
  Tally Count() const;
  // Every link with its jobs and their measured load, the jobs read a slice at a time.
  struct LinkLoads {
    std::vector<controller::LinkSchedule> links;                     // as the plan has them
    std::unordered_map<std::string, std::vector<std::string>> jobs;  // link -> job names
    // Share of the link the jobs' measured profiles use (bytes per second x duty cycle).
    std::unordered_map<std::string, double> measured;
  };
  LinkLoads CollectLinkLoads() const;

  const ServiceConfig& config_;
  Metrics& metrics_;
  const std::function<std::vector<std::string>(const PlanJob&)> job_links_;
  // The topology's links' capacities (bytes per second) by name: fixed from the initial plan
  // on, so read without the lock.
  const std::unordered_map<std::string, double> link_capacity_;

  mutable std::mutex mu_;
  std::condition_variable plan_cv_;  // plan_version_ moved, or stopping_
  bool stopping_ = false;
  std::unordered_map<std::string, ClientState> clients_;
  std::map<std::string, JobState> jobs_;
  std::unordered_map<uint64_t, std::string> job_names_;  // planner id -> name
  // The latest plan of the whole cluster, the parts' put together: each link as the part that
  // last planned a job on it has it, the snapshots of every part, the scores summed (the
  // cushion: the least). Its `jobs` are the last round's changes only.
  PlanSummary summary_;
  struct PartScore {
    double utilization = 0.0, latency = 0.0, cushion_ns = 0.0;
    bool gated = false;
  };
  std::vector<PartScore> part_scores_;
  std::vector<std::shared_ptr<const controller::PlanSnapshot>> part_snapshots_;
  std::vector<int> link_part_;  // the part whose entry summary_.links holds (-1: none yet)
  std::vector<PlanChange> pending_;
  // The jobs not planned yet, with their links once RefreshObservers needed them (none until
  // then, and again after a rank's hello: they follow from its ranks' nodes).
  std::map<std::string, std::optional<std::vector<std::string>>> observers_;
  uint64_t observed_version_ = 0;   // the plan version their sets were made from
  bool observers_changed_ = false;  // a rank of one registered: its links may have changed
  std::function<void()> on_work_;
  std::vector<Outgoing> outbox_;
  uint64_t next_job_id_ = 0;
  uint64_t next_session_ = 0;
  uint64_t plan_version_ = 0;
  std::optional<std::string> silence_cursor_;  // the last job the silence scan visited
  int64_t last_plan_ns_ = 0;
  bool pod_check_ = false;
  std::optional<PodDirectory> pods_;
  // WaitForLinks: the jobs not joined yet, until when, and those whose join is held back.
  std::set<std::string> inherited_;
  int64_t inherited_until_ns_ = 0;
  std::set<std::string> waiting_for_links_;
  // Taking turns: when the sets are recomputed (at a tick: controller::TurnsRefresh); who listens
  // to each job's edges (by job id); and the rank whose edges speak for each job (the lowest that
  // sent one in the last second).
  controller::TurnsRefresh turns_refresh_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> edge_listeners_;
  struct EdgeSource {
    uint32_t rank = 0;
    int64_t last_ns = 0;
  };
  std::unordered_map<uint64_t, EdgeSource> edge_sources_;
};

}  // namespace metronome::service
