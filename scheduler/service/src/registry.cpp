#include "registry.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "metronome/common/clock.hpp"
#include "metronome/controller/observer_yields.hpp"
#include "metronome/controller/rules.hpp"

namespace metronome::service {

using controller::Decision;
using controller::ReportVerdict;

namespace {

proto::ErrorCode CodeFor(proto::DecodeError e) {
  switch (e) {
    case proto::DecodeError::kVersion:
      return proto::ErrorCode::kVersion;
    case proto::DecodeError::kBadField:
      return proto::ErrorCode::kInvalid;
    default:
      return proto::ErrorCode::kMalformed;
  }
}

std::string Printable(const std::string& identity) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

constexpr size_t kMaxDecisions = 16;

}  // namespace

Registry::Registry(const ServiceConfig& config, Metrics& metrics,
                   std::function<std::vector<std::string>(const PlanJob&)> job_links,
                   PlanSummary initial_plan)
    : config_(config), metrics_(metrics), job_links_(std::move(job_links)), link_capacity_([&] {
        std::unordered_map<std::string, double> capacity;
        for (const auto& l : initial_plan.links) capacity[l.name] = l.capacity_bytes_per_s;
        return capacity;
      }()) {
  summary_ = std::move(initial_plan);
  summary_.snapshot.reset();  // no part planned anything yet
  link_part_.assign(summary_.links.size(), -1);
}

void Registry::Handle(const std::vector<std::string>& frames, int64_t t_recv) {
  bool work = false;
  {
    std::lock_guard lock(mu_);
    HandleLocked(frames, t_recv);
    work = !pending_.empty();
  }
  if (work && on_work_) on_work_();  // now, not after the batch: joins wait for no one
}

void Registry::Tick(int64_t now) {
  bool work = false;
  {
    std::lock_guard lock(mu_);
    TickLocked(now);
    work = !pending_.empty();
  }
  if (work && on_work_) on_work_();
}

std::vector<Outgoing> Registry::TakeOutbox() {
  std::lock_guard lock(mu_);
  std::vector<Outgoing> out;
  out.swap(outbox_);
  return out;
}

std::vector<std::string> Registry::LinksOf(const JobState& job) const {
  return job_links_(controller::ToPlanJob(job, RealtimeNs()));
}

// ---------------------------------------------------------------------------------------------
// The planning worker's side.

void Registry::TakeWork(PlanningWork& work) {
  work = PlanningWork{};
  std::lock_guard lock(mu_);
  work.changes.swap(pending_);
  std::set<uint64_t> seen;
  for (const auto& p : work.changes) {
    if (p.kind == PlanChange::kLeave) continue;
    const auto name = job_names_.find(p.id);
    if (name == job_names_.end()) continue;  // left meanwhile
    const JobState& job = jobs_.at(name->second);
    if (!job.has_profile || !seen.insert(p.id).second) continue;
    work.adds.push_back(
        {controller::ToPlanJob(job, RealtimeNs()), p.reason, p.kind == PlanChange::kReplan});
  }
}

void Registry::ApplyRound(const PlanningWork& work, PlanningOutcome& outcome) {
  if (!outcome.plan) return;
  PlanSummary retired;  // what the plan replaced: freed (thousands of links) after the lock
  {
    std::lock_guard lock(mu_);
    std::map<std::string, int> reasons = outcome.leaves;
    for (const auto& a : work.adds) {
      const auto name = job_names_.find(a.job.id);
      if (outcome.refused.contains(a.job.id) || outcome.deferred.contains(a.job.id) ||
          name == job_names_.end()) {
        continue;
      }
      JobState& job = jobs_.at(name->second);
      if (outcome.widen_refused.contains(a.job.id)) {
        Decide(job, "overrun_refused", spdlog::level::info,
               "a " + std::to_string(a.job.profile.phase_floor_ns) +
                   " ns window would stretch the period; the plan stays as it was");
        controller::RecordWidenRefused(job, a.job);
        continue;
      }
      controller::RecordPlanned(job, a.job);
      if (a.replan) ++job.replans;
      ++reasons[a.reason];
    }
    for (const auto& [reason, n] : reasons) {
      metrics_.Replans(reason).Increment(n);
      spdlog::debug("planner: re-planned {} change(s) for {}", n, reason);
    }
    for (auto& [part, plan] : outcome.vacated) MergePart(part, plan);
    retired = std::move(*outcome.plan);
    ApplyPlan(outcome.part, retired, outcome.trigger_ns, outcome.reason);
  }
  plan_cv_.notify_all();
}

bool Registry::WaitForPlanChange(uint64_t seen, std::chrono::steady_clock::time_point not_before) {
  std::unique_lock lock(mu_);
  plan_cv_.wait_until(lock, not_before, [&] { return stopping_; });
  plan_cv_.wait(lock, [&] { return stopping_ || plan_version_ != seen; });
  return !stopping_;
}

uint64_t Registry::PlanVersion() {
  std::lock_guard lock(mu_);
  return plan_version_;
}

void Registry::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  plan_cv_.notify_all();
}

ClusterView Registry::View(const TopologyConfig& topology, const PlanningConfig& planning) {
  ClusterView v;
  v.topology = topology;  // thousands of links: not under the lock
  v.planning = planning;
  {
    std::lock_guard lock(mu_);
    v.plan_version = plan_version_;
    v.plan = part_snapshots_;
    v.jobs.reserve(jobs_.size());
  }
  ForEachJobSliced([&](const std::string& name, const JobState& job) {
    extender::JobSnapshot& j = v.jobs.emplace_back();
    j.id = job.id;
    j.name = name;
    j.priority = job.priority;
    for (const auto& [r, rank] : job.ranks) j.nodes.push_back(rank.node);
    if (job.has_profile) j.profile = job.profile;
    j.planned = job.planned;
    j.best_effort = job.best_effort;
    j.timetable = job.timetable;
  });
  return v;
}

std::map<uint64_t, std::string> Registry::JobNames(uint64_t& free_id) {
  std::lock_guard lock(mu_);
  free_id = next_job_id_ + 1'000'000;  // never collides with a registered job
  return {job_names_.begin(), job_names_.end()};
}

// ---------------------------------------------------------------------------------------------
// Messages (the endpoint thread, under the lock).

void Registry::Queue(const std::string& identity, const proto::Message& m) {
  outbox_.push_back({identity, proto::Encode(m), proto::TypeName(proto::TypeOf(m)).data()});
}

void Registry::Reject(ClientState* client, const std::string& identity, proto::ErrorCode code,
                      const std::string& reason, const std::string& message) {
  metrics_.Rejected(reason).Increment();
  if (client != nullptr) ++client->rejected;
  spdlog::debug("zmq: rejected from {}: {} ({})", Printable(identity), reason, message);
  proto::Error err;
  err.code = code;
  err.message = reason + ": " + message;
  Queue(identity, err);
}

void Registry::HandleLocked(const std::vector<std::string>& frames, int64_t t_recv) {
  if (frames.empty()) return;
  const std::string& identity = frames[0];
  auto it = clients_.find(identity);
  if (it == clients_.end()) {
    if (clients_.size() >= config_.registry.max_clients) {
      Reject(nullptr, identity, proto::ErrorCode::kUnexpected, "capacity",
             "too many clients (" + std::to_string(clients_.size()) + ")");
      return;
    }
    it = clients_.emplace(identity, ClientState{}).first;
    it->second.identity = identity;
    it->second.first_seen_ns = t_recv;
  }
  ClientState& client = it->second;
  client.last_seen_ns = t_recv;
  ++client.messages;
  if (frames.size() != 2) {
    metrics_.Received("invalid").Increment();
    Reject(&client, identity, proto::ErrorCode::kMalformed, "multipart",
           "expected one frame per message, got " + std::to_string(frames.size() - 1));
    return;
  }
  const proto::Decoded d = proto::Decode(frames[1]);
  if (!d.Ok()) {
    metrics_.Received("invalid").Increment();
    Reject(&client, identity, CodeFor(d.error), std::string(proto::DecodeErrorName(d.error)),
           d.detail);
    return;
  }
  const auto type = proto::TypeOf(d.message);
  metrics_.Received(std::string(proto::TypeName(type))).Increment();
  switch (type) {
    case proto::MessageType::kHello:
      HandleHello(client, std::get<proto::Hello>(d.message), t_recv);
      break;
    case proto::MessageType::kClockPing: {
      const auto& ping = std::get<proto::ClockPing>(d.message);
      proto::ClockPong pong;
      pong.seq = ping.seq;
      pong.t1_ns = ping.t1_ns;
      pong.t2_ns = t_recv;
      pong.t3_ns = RealtimeNs();
      Queue(identity, pong);  // t3 is "now": the endpoint sends it as this call returns
      break;
    }
    case proto::MessageType::kProfileReport:
      HandleReport(client, std::get<proto::ProfileReport>(d.message), t_recv);
      break;
    case proto::MessageType::kBye:
      HandleBye(client, std::get<proto::Bye>(d.message), t_recv);
      break;
    case proto::MessageType::kPhaseEdge:
      HandleEdge(client, std::get<proto::PhaseEdge>(d.message), t_recv);
      break;
    case proto::MessageType::kError: {
      const auto& e = std::get<proto::Error>(d.message);
      spdlog::warn("zmq: client {} reports an error: code={} {}", Printable(identity),
                   static_cast<uint32_t>(e.code), e.message);
      break;
    }
    default:
      Reject(&client, identity, proto::ErrorCode::kUnexpected, "unexpected",
             std::string(proto::TypeName(type)) + " is sent by the scheduler, not to it");
      break;
  }
}

void Registry::EnablePodCheck() {
  std::lock_guard lock(mu_);
  pod_check_ = true;
}

void Registry::SetPods(PodDirectory pods) {
  std::lock_guard lock(mu_);
  pods_ = std::move(pods);
}

void Registry::HandleHello(ClientState& client, const proto::Hello& m, int64_t now) {
  if (m.job_id.empty()) {
    Reject(&client, client.identity, proto::ErrorCode::kInvalid, "invalid", "empty job_id");
    return;
  }
  // The hello's word, or with the pod check the pod's (pod_identity.hpp).
  int32_t priority = m.priority;
  std::string pod_namespace;
  if (pod_check_) {
    const HelloVerdict v = CheckHelloAgainstPods(m, pods_ ? &*pods_ : nullptr);
    if (!v.reason.empty()) {
      // A refused shim says hello again every second: its first refusal is a warning.
      spdlog::log(client.rejected == 0 ? spdlog::level::warn : spdlog::level::debug,
                  "registry: hello of job={} rank={} node={} refused: {}", m.job_id, m.rank, m.node,
                  v.message);
      Reject(&client, client.identity, proto::ErrorCode::kInvalid, v.reason, v.message);
      return;
    }
    priority = v.priority;
    pod_namespace = v.job_namespace;
  }
  if (client.members.size() >= config_.registry.max_ranks_per_client &&
      !client.members.contains({m.job_id, m.rank})) {
    Reject(&client, client.identity, proto::ErrorCode::kUnexpected, "capacity",
           "this peer already speaks for " + std::to_string(client.members.size()) +
               " ranks (registry.max_ranks_per_client)");
    return;
  }
  auto it = jobs_.find(m.job_id);
  if (it == jobs_.end()) {
    JobState job;
    job.name = m.job_id;
    job.id = ++next_job_id_;
    job.priority = priority;
    job.world_size = m.world_size;
    job.created_ns = now;
    job.pod_namespace = pod_namespace;
    job_names_[job.id] = job.name;
    it = jobs_.emplace(m.job_id, std::move(job)).first;
    spdlog::info("registry: job {} created (id {}, world size {}, priority {})", m.job_id,
                 it->second.id, m.world_size, priority);
  }
  JobState& job = it->second;
  if (job.pod_namespace != pod_namespace) {
    Reject(&client, client.identity, proto::ErrorCode::kInvalid, "pod_namespace",
           "job " + m.job_id + " belongs to namespace '" + job.pod_namespace + "', not '" +
               pod_namespace + "'");
    return;
  }
  if (job.world_size != m.world_size) {
    Reject(&client, client.identity, proto::ErrorCode::kInvalid, "invalid",
           "world_size " + std::to_string(m.world_size) + " differs from job " + m.job_id + "'s " +
               std::to_string(job.world_size));
    return;
  }
  auto rit = job.ranks.find(m.rank);
  const bool again = rit != job.ranks.end();
  if (again && rit->second.identity != client.identity) {
    auto old = clients_.find(rit->second.identity);
    if (old != clients_.end()) old->second.members.erase({m.job_id, m.rank});
  }
  RankState& rank = job.ranks[m.rank];
  rank.rank = m.rank;
  rank.node = m.node;
  rank.identity = client.identity;
  rank.session = ++next_session_;
  rank.pid = m.pid;
  rank.shim_version = m.shim_version;
  rank.features = m.features;
  rank.priority = priority;
  rank.registered_ns = now;
  rank.last_seen_ns = now;
  client.members.insert({m.job_id, m.rank});
  metrics_.Registrations(again ? "reregistration" : "new").Increment();
  spdlog::info("registry: {} job={} rank={}/{} node={} pid={} session={} client={}",
               again ? "re-registered" : "registered", m.job_id, m.rank, m.world_size, m.node,
               m.pid, rank.session, Printable(client.identity));

  proto::Welcome w;
  w.session = rank.session;
  w.report_interval_ms = config_.registry.report_interval_ms;
  w.server_time_ns = RealtimeNs();
  if (config_.controller.turns) w.features = proto::kFeatureTurns;
  Queue(client.identity, w);
  if (config_.controller.turns) {
    turns_refresh_.JobsChanged();  // its links follow from its ranks' nodes
    if (job.turns_version > 0 && (rank.features & proto::kFeatureTurns) != 0) {
      proto::TurnPush t{job.name, job.turns_version, job.sends_edges, job.turns};
      Queue(client.identity, t);
      metrics_.TurnPushes().Increment();
    }
  }

  if (priority > job.priority) {
    job.priority = priority;
    if (job.planned) pending_.push_back({PlanChange::kReplan, job.id, "priority", now});
  }
  if (job.planned && job.has_profile) {
    // Node set may have changed (a rank moved): the links follow from the nodes.
    std::vector<std::string> now_links;
    now_links = LinksOf(job);
    if (now_links != job.links) {
      pending_.push_back({PlanChange::kReplan, job.id, "nodes", now});
    }
  }
  if (waiting_for_links_.contains(job.name) && !LinksOf(job).empty()) {
    ReleaseJoin(job, now, "node " + m.node + " gives it links");
  }
  if (job.planned || job.yields.count > 0) PushTimetable(job, rank, "register", now);
  if (!job.planned) {
    observers_[job.name].reset();
    observers_changed_ = true;
  }
}

void Registry::WaitForLinks(std::set<std::string> jobs, int64_t until_ns) {
  std::lock_guard lock(mu_);
  inherited_ = std::move(jobs);
  inherited_until_ns_ = until_ns;
}

void Registry::QueueJoin(JobState& job, int64_t now) {
  const bool inherited = inherited_.erase(job.name) > 0;
  if (inherited && now < inherited_until_ns_ && LinksOf(job).empty()) {
    waiting_for_links_.insert(job.name);
    Decide(job, "join_held",
           "ran gated under the previous leader; planned once its ranks' nodes give it links, at "
           "the latest in " +
               std::to_string((inherited_until_ns_ - now) / 1'000'000) +
               " ms (its shims keep their timetable meanwhile)");
    return;
  }
  pending_.push_back({PlanChange::kJoin, job.id, "join", now});
}

void Registry::ReleaseJoin(JobState& job, int64_t now, const std::string& why) {
  waiting_for_links_.erase(job.name);
  Decide(job, "join_released", why);
  pending_.push_back({PlanChange::kJoin, job.id, "join", now});
}

void Registry::PushTimetable(JobState& job, RankState& rank, const char* reason, int64_t now) {
  proto::TimetablePush p;
  p.job_id = job.name;
  p.timetable = job.timetable;  // an ungated job's is always open: sent as an explicit "no gate"
  p.yields = job.yields;        // the higher-ranked windows, in the same epoch
  Queue(rank.identity, p);
  rank.last_push_ns = now;
  metrics_.TimetablePushes(reason).Increment();
}

void Registry::Decide(JobState& job, const char* decision, const std::string& detail) {
  Decide(job, decision, spdlog::level::info, detail);
}

void Registry::Decide(JobState& job, const char* decision, spdlog::level::level_enum level,
                      const std::string& detail) {
  metrics_.ControllerDecisions(decision).Increment();
  spdlog::log(level, "controller: job={} decision={} {}", job.name, decision, detail);
  job.decisions.push_back(std::string(decision) + ": " + detail);
  if (job.decisions.size() > kMaxDecisions) job.decisions.erase(job.decisions.begin());
}

JobState* Registry::Sender(ClientState& client, const std::string& job_id, uint32_t rank,
                           const char* what) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.ranks.contains(rank) ||
      it->second.ranks[rank].identity != client.identity) {
    Reject(&client, client.identity, proto::ErrorCode::kUnexpected, "unexpected",
           std::string(what) + " for job " + job_id + " rank " + std::to_string(rank) +
               " before its hello (register first)");
    return nullptr;
  }
  return &it->second;
}

void Registry::HandleReport(ClientState& client, const proto::ProfileReport& m, int64_t now) {
  JobState* sender = Sender(client, m.job_id, m.rank, "report");
  if (sender == nullptr) return;
  JobState& job = *sender;
  RankState& rank = job.ranks[m.rank];
  const bool was_deferred = !job.overrun_deferred_to.empty();
  const ReportVerdict v = ApplyReport(job, rank, m, config_.controller, config_.planning, now,
                                      [this](const JobState& judged) {
                                        std::vector<const JobState*> above;
                                        for (const auto& [name, other] : jobs_) {
                                          if (controller::OutranksOnSharedLink(other, judged)) {
                                            above.push_back(&other);
                                          }
                                        }
                                        return above;
                                      });
  if (v.new_phases > 0) {
    metrics_.PhasesMeasured().Increment(v.new_phases);
    const size_t n = std::min<size_t>(v.new_phases, job.phases.size());
    for (size_t i = job.phases.size() - n; i < job.phases.size(); ++i) {
      if (job.planned && !job.best_effort) {
        metrics_.PhaseLateness().Observe(std::abs(static_cast<double>(job.phases[i].lateness_ns)) *
                                         1e-9);
      }
    }
  }
  if (v.realigned > 0) metrics_.PhasesRealigned().Increment(static_cast<double>(v.realigned));
  if (v.late_phases > 0) {
    metrics_.PhasesLate().Increment(v.late_phases);
    // Logged at info when a streak starts, at debug while it lasts; always counted.
    Decide(job, "hold",
           job.consecutive_late_reports <= 1 ? spdlog::level::info : spdlog::level::debug,
           std::to_string(v.late_phases) + " phase(s) past the cushion (" +
               std::to_string(job.timetable.late_slack_ns) +
               " ns): held to the next window by the gate (stop-and-wait)");
  }
  if (!v.overrun_deferred_to.empty()) {
    // Logged at info when the wait starts, at debug while it lasts; always counted.
    Decide(job, "overrun_deferred", was_deferred ? spdlog::level::debug : spdlog::level::info,
           "phases take " + std::to_string(m.comm_ns) + " ns in a " +
               std::to_string(job.timetable.window_ns) + " ns window while job " +
               v.overrun_deferred_to +
               " (higher priority, on its links) runs past its cushion: its widening first");
  }
  if (config_.controller.turns && job.has_profile) turns_refresh_.ProfilesMoved();
  if (v.first_profile) {
    spdlog::info("registry: job={} profile period={}ns comm={}ns bytes={} confidence={:.2f}",
                 job.name, job.profile.period_ns, job.profile.comm_ns, job.profile.bytes_per_phase,
                 job.confidence);
    QueueJoin(job, now);
  }
  if (v.decision != Decision::kNone) {
    Decide(job, DecisionName(v.decision), v.reason);
    job.last_replan_ns = now;
    pending_.push_back({PlanChange::kReplan, job.id,
                        v.decision == Decision::kReplanLateness  ? "lateness"
                        : v.decision == Decision::kReplanOverrun ? "overrun"
                                                                 : "profile",
                        now});
  }
  if (v.repush) {
    Decide(job, "repush",
           "rank " + std::to_string(m.rank) + " runs timetable v" +
               std::to_string(m.timetable_version) + ", current v" +
               std::to_string(job.timetable.version));
    PushTimetable(job, rank, "stale", now);
  }
}

void Registry::HandleBye(ClientState& client, const proto::Bye& m, int64_t now) {
  (void)now;
  auto it = jobs_.find(m.job_id);
  if (it == jobs_.end() || !it->second.ranks.contains(m.rank) ||
      it->second.ranks[m.rank].identity != client.identity) {
    Reject(&client, client.identity, proto::ErrorCode::kUnexpected, "unexpected",
           "bye for job " + m.job_id + " rank " + std::to_string(m.rank) + ", not registered");
    return;
  }
  it->second.ranks.erase(m.rank);
  client.members.erase({m.job_id, m.rank});
  spdlog::info("registry: bye job={} rank={} reason='{}'", m.job_id, m.rank, m.reason);
  if (it->second.ranks.empty()) {
    RemoveJob(m.job_id, "bye");
  } else {
    RanksLeft(it->second, now);
  }
}

void Registry::RanksLeft(JobState& job, int64_t now) {
  int32_t highest = std::numeric_limits<int32_t>::min();
  for (const auto& [r, rank] : job.ranks) highest = std::max(highest, rank.priority);
  if (job.ranks.empty() || highest == job.priority) return;
  job.priority = highest;
  if (job.planned) pending_.push_back({PlanChange::kReplan, job.id, "priority", now});
}

void Registry::RemoveJob(const std::string& name, const char* reason) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return;
  if (it->second.planned || it->second.has_profile) {
    pending_.push_back({PlanChange::kLeave, it->second.id, "leave", RealtimeNs()});
  }
  for (const auto& [r, rank] : it->second.ranks) {
    auto c = clients_.find(rank.identity);
    if (c != clients_.end()) c->second.members.erase({name, r});
  }
  observers_.erase(name);
  waiting_for_links_.erase(name);
  edge_sources_.erase(it->second.id);
  if (config_.controller.turns) turns_refresh_.JobsChanged();
  metrics_.JobsRemoved(reason).Increment();
  job_names_.erase(it->second.id);
  spdlog::info("registry: job {} removed ({})", name, reason);
  jobs_.erase(it);
}

// A part's links, snapshot and scores into the cluster's plan. A link takes the part's entry
// where a job of the part crosses it, or where the part's entry stood (its jobs left or moved).
void Registry::MergePart(size_t part, PlanSummary& plan) {
  if (part >= part_scores_.size()) {
    part_scores_.resize(part + 1);
    part_snapshots_.resize(part + 1);
  }
  const int p = static_cast<int>(part);
  bool gated = false;  // the part's cushion counts only where it gates a job
  for (size_t l = 0; l < plan.links.size() && l < summary_.links.size(); ++l) {
    const controller::LinkSchedule& mine = plan.links[l];
    gated = gated || mine.gated_jobs > 0;
    if (mine.gated_jobs + mine.best_effort_jobs == 0 && link_part_[l] != p) continue;
    std::swap(summary_.links[l], plan.links[l]);
    link_part_[l] = p;
  }
  std::swap(part_snapshots_[part], plan.snapshot);
  part_scores_[part] = {plan.utilization, plan.latency, plan.cushion_ns, gated};
  summary_.epoch_ns = plan.epoch_ns;
  summary_.utilization = summary_.latency = 0.0;
  bool any = false;
  for (const PartScore& s : part_scores_) {
    summary_.utilization += s.utilization;
    summary_.latency += s.latency;
    if (!s.gated) continue;
    summary_.cushion_ns = any ? std::min(summary_.cushion_ns, s.cushion_ns) : s.cushion_ns;
    any = true;
  }
  if (!any) summary_.cushion_ns = plan.cushion_ns;
}

void Registry::ApplyPlan(size_t part, PlanSummary& plan, int64_t trigger_ns, const char* reason) {
  MergePart(part, plan);
  std::swap(summary_.jobs, plan.jobs);
  ++plan_version_;
  last_plan_ns_ = RealtimeNs();
  size_t pushed = 0;
  for (const auto& s : summary_.jobs) {
    const auto name = job_names_.find(s.id);
    if (name == job_names_.end()) continue;
    JobState& job = jobs_.at(name->second);
    const bool was_planned = job.planned;
    const bool was_best_effort = job.best_effort;
    const bool was_held = controller::HeldToAWindow(job);
    Timetable before = job.timetable;
    uint32_t check = 0;
    if (!AdoptSchedule(job, s, config_.timetable, check)) {
      if ((check & kTimetableRejectMask) != 0) {
        spdlog::error("planner: job {} got an unusable timetable (check {:#x}); not pushed",
                      job.name, check);
      }
      continue;
    }
    observers_.erase(job.name);
    if (config_.controller.turns && controller::HeldToAWindow(job) != was_held) {
      turns_refresh_.JobsChanged();  // who may take turns with whom moved
    }
    const Timetable& tt = job.timetable;
    job.links = LinksOf(job);
    before.version = tt.version;
    // Only the higher-ranked windows moved: on a crowded link every move of a gated window
    // re-pushes the jobs below it (hundreds a second), so those stay out of the info log.
    const bool yields_only = was_planned && before == tt && was_best_effort == s.best_effort;
    spdlog::log(
        yields_only ? spdlog::level::debug : spdlog::level::info,
        "planner: job={} v{} {} period={}ns offset={}ns window={}ns slack={}ns max_wait={}ns "
        "links={} slowdown={:.3f}",
        job.name, tt.version,
        yields_only      ? "yields moved"
        : AlwaysOpen(tt) ? "not gated"
                         : (s.best_effort ? "best-effort" : (was_planned ? "updated" : "gated")),
        tt.period_ns, tt.offset_ns, tt.window_ns, tt.late_slack_ns, tt.max_wait_ns,
        job.links.size(), s.predicted_slowdown);
    const int64_t now = RealtimeNs();
    for (auto& [r, rank] : job.ranks) {
      PushTimetable(job, rank, reason, now);
      metrics_.PushLatency().Observe(static_cast<double>(now - trigger_ns) * 1e-9);
      ++pushed;
    }
  }
  spdlog::debug("planner: plan v{} applied, {} push(es)", plan_version_, pushed);
}

void Registry::RefreshObservers(int64_t now) {
  observed_version_ = plan_version_;
  observers_changed_ = false;
  if (observers_.empty()) return;
  // While nothing is gated anywhere (a cluster starting: thousands of hellos and no plan yet)
  // there is nothing to yield to, and nothing to work out.
  const bool any_gated =
      std::any_of(summary_.links.begin(), summary_.links.end(),
                  [](const controller::LinkSchedule& l) { return l.gated_jobs > 0; });
  // The observers' links, then the planned jobs on any of them: one pass over the jobs, a
  // lookup per link of each.
  std::set<std::string> watched;
  if (any_gated) {
    for (auto& [name, links] : observers_) {
      if (!links) links = LinksOf(jobs_.at(name));
      watched.insert(links->begin(), links->end());
    }
  }
  controller::GatedJobsByLink gated;
  for (const auto& [name, job] : jobs_) {
    if (watched.empty()) break;
    if (!job.planned) continue;
    if (std::any_of(job.links.begin(), job.links.end(),
                    [&](const std::string& l) { return watched.contains(l); })) {
      gated.Add(job);
    }
  }
  for (const auto& [name, links] : observers_) {
    JobState& job = jobs_.at(name);
    const YieldSet yields =
        links && !gated.Empty() ? gated.YieldsFor(job.priority, *links) : YieldSet{};
    if (!controller::AdoptObserverYields(job, yields, config_.timetable)) continue;
    spdlog::debug("registry: job={} not planned yet: yields to {} window(s) (v{})", name,
                  job.yields.count, job.timetable.version);
    for (auto& [r, rank] : job.ranks) PushTimetable(job, rank, "observe", now);
  }
}

void Registry::TickLocked(int64_t now) {
  if (now >= inherited_until_ns_ && !(inherited_.empty() && waiting_for_links_.empty())) {
    inherited_.clear();
    for (const std::string& name : std::exchange(waiting_for_links_, {})) {
      ReleaseJoin(jobs_.at(name), now, "no link known by the end of the wait");
    }
  }
  if (!observers_.empty() && (observers_changed_ || observed_version_ != plan_version_)) {
    RefreshObservers(now);
  }
  if (turns_refresh_.Due(now)) RefreshTurns(now);
  // Silent ranks, then jobs left without ranks. Every rank at once held the endpoint thread for
  // milliseconds at 65,536 ranks, so each tick visits a share of the jobs, going on from where
  // the last stopped: every job once in a twentieth of the timeout, so that a rank is dropped
  // within 5 % (or a tick) of its timeout.
  const int64_t timeout = config_.registry.rank_timeout_ms * 1'000'000;
  const int64_t tick = std::max<int64_t>(config_.controller.tick_ms, 1) * 1'000'000;
  const auto ticks_a_pass = static_cast<size_t>(std::max<int64_t>(timeout / 20 / tick, 1));
  const size_t share = (jobs_.size() + ticks_a_pass - 1) / ticks_a_pass;
  auto it = silence_cursor_ ? jobs_.upper_bound(*silence_cursor_) : jobs_.begin();
  std::vector<std::string> empty;
  for (size_t n = 0; n < share && it != jobs_.end(); ++n, ++it) {
    auto& [name, job] = *it;
    bool dropped = false;
    for (auto r = job.ranks.begin(); r != job.ranks.end();) {
      if (now - r->second.last_seen_ns > timeout) {
        dropped = true;
        spdlog::info("registry: job={} rank={} silent for {} ms: dropped", name, r->first,
                     (now - r->second.last_seen_ns) / 1'000'000);
        metrics_.RankTimeouts().Increment();
        auto c = clients_.find(r->second.identity);
        if (c != clients_.end()) c->second.members.erase({name, r->first});
        r = job.ranks.erase(r);
      } else {
        ++r;
      }
    }
    if (job.ranks.empty()) {
      empty.push_back(name);
    } else if (dropped) {
      RanksLeft(job, now);
    }
  }
  const bool pass_done = it == jobs_.end();
  silence_cursor_.reset();
  if (!pass_done) silence_cursor_ = std::prev(it)->first;
  for (const auto& name : empty) RemoveJob(name, "timeout");
  if (!pass_done) return;
  for (auto c = clients_.begin(); c != clients_.end();) {
    if (c->second.members.empty() && now - c->second.last_seen_ns > timeout) {
      c = clients_.erase(c);
    } else {
      ++c;
    }
  }
}

Registry::LinkLoads Registry::CollectLinkLoads() const {
  LinkLoads out;
  {
    std::lock_guard lock(mu_);
    out.links = summary_.links;
  }
  for (const auto& l : out.links) out.measured[l.name] = 0.0;
  ForEachJobSliced([&](const std::string& name, const JobState& job) {
    for (const auto& l : job.links) out.jobs[l].push_back(name);
    if (!job.has_profile || job.profile.period_ns <= 0) return;
    double bytes_per_s = 0.0;  // while communicating
    if (job.profile.bytes_per_phase > 0 && job.profile.comm_ns > 0) {
      bytes_per_s = static_cast<double>(job.profile.bytes_per_phase) * 1e9 /
                    static_cast<double>(job.profile.comm_ns);
    } else {
      // Bytes unknown: the job runs at its bottleneck's capacity during its phase.
      bytes_per_s = std::numeric_limits<double>::infinity();
      for (const auto& l : job.links) {
        const auto c = link_capacity_.find(l);
        if (c != link_capacity_.end() && c->second > 0) {
          bytes_per_s = std::min(bytes_per_s, c->second);
        }
      }
    }
    const double duty =
        static_cast<double>(job.profile.comm_ns) / static_cast<double>(job.profile.period_ns);
    for (const auto& l : job.links) {
      const auto c = link_capacity_.find(l);
      if (c == link_capacity_.end() || c->second <= 0.0) continue;
      out.measured[l] += std::min(bytes_per_s, c->second) / c->second * duty;
    }
  });
  return out;
}

Registry::Tally Registry::Count() const {
  Tally t;
  ForEachJobSliced([&](const std::string&, const JobState& job) {
    ++t.jobs;
    t.ranks += job.ranks.size();
    if (job.planned) ++t.planned;
    if (job.planned && job.best_effort) ++t.best_effort;
  });
  std::lock_guard lock(mu_);
  t.clients = clients_.size();
  t.links = summary_.links.size();
  return t;
}

}  // namespace metronome::service
